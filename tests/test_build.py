"""aotk build: manifest -> lib<name>.so + header + depfile, checked without a GPU."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import aotk
from aotk.toolchain.locate import wheel_directories
from aotk_cli.main import main
from tests.conftest import cuda_available, run_c_program, tree_pythonpath
from tests.projects import root_project as _project

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    project = _project(tmp_path_factory.mktemp("built"))
    result = aotk.build(project / "aotk.toml")
    return project, result


def _cuda_include():
    candidates = [Path(d) / "include" for d in wheel_directories()] + [Path("/usr/local/cuda/include")]
    for candidate in candidates:
        if (candidate / "cuda.h").is_file():
            return candidate
    pytest.fail("cuda.h not found: the nvidia-cuda-nvcc wheel's dependencies should bring it")


HEADER_USE = """
#include "examples.h"
int use(float *x, float *y, float *out, int32_t n, CUstream_type stream) {
    if (examples_add_select(x, y, out, n) < 0) return -1;
    return examples_add(stream, x, y, out, n) + (examples_last_error() != 0) +
           (examples_info() != 0) + (examples_add_variant_name(0) != 0);
}
"""


@pytest.mark.parametrize("compiler, standard", [("cc", "c99"), ("c++", "c++11")])
@pytest.mark.parametrize("with_cuda_h", [False, True])
def test_header_compiles_strictly(built, tmp_path, compiler, standard, with_cuda_h):
    _, result = built
    prelude = '#include <cuda.h>\n#define CUstream_type CUstream\n' if with_cuda_h else \
        '#define CUstream_type struct CUstream_st *\n'
    source = tmp_path / ("use.c" if compiler == "cc" else "use.cpp")
    source.write_text(prelude + HEADER_USE)
    command = [compiler, f"-std={standard}", "-Wall", "-Wextra", "-Werror", "-pedantic",
               "-c", str(source), "-I", str(result.header.parent), "-o", str(tmp_path / "use.o")]
    if with_cuda_h:
        command += ["-isystem", str(_cuda_include())]   # cuda.h itself is not -pedantic clean
    subprocess.run(command, check=True)


SELECT_PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "examples.h"
#define PTR(address) ((float *)(uintptr_t)(address))
static int failures;
static void expect(const char *what, int got, int want) {
    if (got != want) { printf("%s: got %d want %d\n", what, got, want); failures++; }
}
int main(void) {
    /* add: 0 BLOCK=256 aligned, 1 BLOCK=256 generic (both when n < 65536),
            2 BLOCK=1024 aligned, 3 BLOCK=1024 generic */
    expect("small aligned divisible", examples_add_select(PTR(256), PTR(512), PTR(768), 4096), 0);
    expect("small unaligned", examples_add_select(PTR(260), PTR(512), PTR(768), 4096), 1);
    expect("small non-divisible", examples_add_select(PTR(256), PTR(512), PTR(768), 4095), 1);
    expect("large aligned", examples_add_select(PTR(256), PTR(512), PTR(768), 1 << 20), 2);
    expect("large non-divisible", examples_add_select(PTR(256), PTR(512), PTR(768), (1 << 20) + 1), 3);
    expect("copy2d aligned", examples_copy2d_select(PTR(16), PTR(32), 64, 64, 64, 64), 0);
    expect("copy2d odd stride", examples_copy2d_select(PTR(16), PTR(32), 64, 64, 65, 64), 1);
    if (strcmp(examples_add_variant_name(2), "add[BLOCK=1024] aligned") != 0) failures++;
    if (examples_add_variant_name(4) != NULL || examples_add_variant_name(-1) != NULL) failures++;
    expect("modules loaded before any launch", examples_modules_loaded(), 0);
    int status = examples_add(NULL, PTR(256), PTR(512), PTR(768), 4096);
    printf("status %d: %s\n", status, examples_last_error());
    if (status == 0) failures++;
    /* An empty grid is a success and launches nothing, GPU or not. */
    expect("empty grid", examples_add(NULL, PTR(256), PTR(512), PTR(768), 0), 0);
    return failures;
}
"""


def test_c_program_checks_dispatch(built, tmp_path):
    _, result = built
    run = run_c_program(SELECT_PROGRAM, result.library, tmp_path)
    assert run.returncode == 0, run.stdout
    if not cuda_available():
        assert "status 1002: add: no CUDA driver" in run.stdout


def test_library_has_no_link_time_cuda_dependency(built):
    _, result = built
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(result.library)],
                               capture_output=True, text=True, check=True).stdout
    assert not re.search(r"\bcu[A-Z]\w*", undefined)
    exported = subprocess.run(["nm", "-D", "--defined-only", str(result.library)],
                              capture_output=True, text=True, check=True).stdout
    names = set(re.findall(r"\b(examples_\w+)", exported))
    assert names == {"examples_add", "examples_add_select", "examples_add_variant_name",
                     "examples_copy", "examples_copy_select", "examples_copy_variant_name",
                     "examples_copy2d", "examples_copy2d_select", "examples_copy2d_variant_name",
                     "examples_softmax", "examples_softmax_select", "examples_softmax_variant_name",
                     "examples_layer_norm", "examples_layer_norm_select",
                     "examples_layer_norm_variant_name", "examples_row_argmax",
                     "examples_row_argmax_select", "examples_row_argmax_variant_name",
                     "examples_transpose", "examples_transpose_select",
                     "examples_transpose_variant_name", "examples_matmul",
                     "examples_matmul_select", "examples_matmul_variant_name",
                     "examples_matmul_leaky_relu", "examples_matmul_leaky_relu_select",
                     "examples_matmul_leaky_relu_variant_name", "examples_batched_matmul",
                     "examples_batched_matmul_select", "examples_batched_matmul_variant_name",
                     "examples_matmul_descriptor", "examples_matmul_descriptor_select",
                     "examples_matmul_descriptor_variant_name",
                     "examples_last_error", "examples_info", "examples_modules_loaded"} | {
        f"examples_{kernel}_tc{suffix}" for kernel in ("add", "softmax", "layer_norm", "matmul")
        for suffix in ("", "_select", "_variant_name")}
    assert "libcuda" not in subprocess.run(["ldd", str(result.library)], capture_output=True,
                                           text=True).stdout


LARGE = "BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACTIVATION="
SMALL = "BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8, ACTIVATION="


@pytest.mark.parametrize("m, n, k, chosen", [
    (4096, 4096, 4096, f"matmul[{LARGE}] aligned"),
    # Divisible by 8, not 16: the large tiles' aligned-only build does not apply, their
    # ":8" build does (16-byte rows all the same).
    (3000, 3000, 3000, f"matmul[{LARGE}]"),
    (1000, 1200, 3000, f"matmul[{LARGE}]"),
    # Odd sizes go to the small tiles' generic build, never to large unaligned tiles.
    (1001, 1100, 1000, f"matmul[{SMALL}] generic"),
    (64, 64, 64, f"matmul[{SMALL}] aligned")])
def test_large_matmul_tiles_run_on_aligned_calls_only(built, m, n, k, chosen):
    """specialize = "aligned" on a variant: only its aligned build exists, so a call it
    cannot take goes on to the next variant (the README's dispatch order)."""
    lib = aotk.load(built[1].library)
    assert lib.matmul.select(1 << 20, 1 << 21, 1 << 22, m, n, k, k, 1, n, 1, n, 1) == chosen
    assert not [name for name in lib.kernels["matmul"]["variants"]
                if LARGE in name and "generic" in name]


def test_python_load_select_and_errors(built):
    _, result = built
    lib = aotk.load(result.library)
    assert set(lib.kernels) == {"add", "copy", "copy2d", "softmax", "layer_norm",
                                "row_argmax", "transpose", "matmul", "matmul_leaky_relu",
                                "matmul_descriptor", "batched_matmul", "add_tc", "softmax_tc",
                                "layer_norm_tc", "matmul_tc"}
    assert lib.kernels["add"]["params"][3] == {"name": "n", "type": "i32"}
    assert lib.add.select(256, 512, 768, 4096) == "add[BLOCK=256] aligned"
    assert lib.add.select(260, 512, 768, 1 << 20) == "add[BLOCK=1024] generic"
    with pytest.raises(TypeError, match="takes 4 arguments"):
        lib.add.select(1, 2, 3)
    with pytest.raises(TypeError, match="'n' must be an integer"):
        lib.add.select(256, 512, 768, "ten")
    with pytest.raises(TypeError, match="'x_ptr' must be a CUDA array"):
        lib.add.select(object(), 512, 768, 16)
    class FakeTensor:   # what the fast path reads from a torch tensor
        def __init__(self, address):
            self.address = address

        def data_ptr(self):
            return self.address
    assert lib.add.select(FakeTensor(256), FakeTensor(512), FakeTensor(772), 4096) == \
        "add[BLOCK=256] generic"
    if not cuda_available():
        with pytest.raises(aotk.AotkError, match="no CUDA driver.*status 1002"):
            lib.add(256, 512, 768, 4096)
        with pytest.raises(aotk.AotkError, match="no CUDA driver.*status 1002"):
            lib.add(FakeTensor(256), FakeTensor(512), FakeTensor(768), 4096, stream=0)
    with pytest.raises(TypeError, match="stream= takes None"):
        lib.add(256, 512, 768, 4096, stream="default")


def test_python_launch_refuses_cpu_tensors(built):
    """A torch CPU tensor's data_ptr() is a host address: refused before any launch, by the
    fast path and the general one (a raw address or a stream= keyword takes the latter)."""
    torch = pytest.importorskip("torch")
    lib = aotk.load(built[1].library)
    x = torch.ones(16)
    for call in (lambda: lib.add(x, x, x, 16), lambda: lib.add(x, x, x, 16, stream=0)):
        with pytest.raises(ValueError, match=r"examples_add: argument 'x_ptr' is a tensor in "
                                             r"CPU memory \(device cpu\)"):
            call()


def test_python_launch_refuses_a_tensor_of_another_dtype(built):
    """Checked before the device: a float16 tensor where the kernel reads float32 is a
    TypeError naming the argument and both types, whichever path the call takes."""
    torch = pytest.importorskip("torch")
    lib = aotk.load(built[1].library)
    right, wrong = torch.ones(16), torch.ones(16, dtype=torch.float16)
    for call in (lambda: lib.add(right, wrong, right, 16),
                 lambda: lib.add(right, wrong, right, 16, stream=0)):
        with pytest.raises(TypeError, match=r"examples_add: argument 'y_ptr' is a torch.float16 "
                                            r"tensor, but the kernel takes \*fp32 \(torch.float32\)"):
            call()
    codes = torch.zeros((4, 64), dtype=torch.uint8)   # fp16 pointers take only float16
    with pytest.raises(TypeError, match="'X' is a torch.uint8 tensor, but the kernel takes "
                                        r"\*fp16 \(torch.float16\)"):
        lib.layer_norm(codes, codes, codes, codes, right, right, 64, 4, 64, 1e-5)


def test_depfile_lists_manifest_sources_and_local_imports(tmp_path):
    project = _project(tmp_path)
    kernels = project / "examples" / "kernels"
    (kernels / "scale_helpers.py").write_text(
        "import aotk\n\n@aotk.jit\ndef twice(x):\n    return x * 2\n")
    (kernels / "copy.py").write_text((kernels / "copy.py").read_text().replace(
        "import aotk.language as tl\n", "import aotk.language as tl\nfrom scale_helpers import twice\n"
    ).replace("tl.load(src + offs, mask=mask)", "twice(tl.load(src + offs, mask=mask))"))
    result = aotk.build(project / "aotk.toml")
    text = result.depfile.read_text()
    head = text.split("\n\n")[0]
    assert head.startswith(f"{result.library} {result.header}:")
    for path in ["aotk.toml", "examples/kernels/add.py", "examples/kernels/copy.py",
                 "examples/kernels/copy2d.py", "examples/kernels/scale_helpers.py"]:
        assert str((project / path).resolve()) in head


def test_noop_rebuild_is_fast_and_identical(tmp_path):
    project = _project(tmp_path)
    first = aotk.build(project / "aotk.toml")
    library_bytes, header_bytes = first.library.read_bytes(), first.header.read_bytes()
    start = time.perf_counter()
    second = aotk.build(project / "aotk.toml")
    elapsed = time.perf_counter() - start
    assert (second.compiled, second.linked) == (0, False)
    assert elapsed < 2.0
    assert second.library.read_bytes() == library_bytes
    assert second.header.read_bytes() == header_bytes


def test_builds_from_two_directories_are_byte_identical(tmp_path):
    one = aotk.build(_project(tmp_path, "one") / "aotk.toml")
    two = aotk.build(_project(tmp_path, "elsewhere") / "aotk.toml")
    assert one.library.read_bytes() == two.library.read_bytes()
    assert one.header.read_bytes() == two.header.read_bytes()


def test_static_library_and_pkgconfig(tmp_path):
    result = aotk.build(_project(tmp_path) / "aotk.toml", static=True)
    assert result.static_library.read_bytes().startswith(b"!<arch>")
    assert "-lexamples" in result.pkgconfig.read_text()


BAD_MANIFESTS = [
    ("kernel.add.sigature", lambda t: t.replace('signature = "*fp32, *fp32, *fp32, i32"',
                                                'sigature = "*fp32, *fp32, *fp32, i32"'),
     "did you mean 'signature'"),
    ("kernel.add.source", lambda t: t.replace("examples/kernels/add.py", "examples/kernels/nope.py"),
     "does not exist"),
    ("kernel.add.signature", lambda t: t.replace("*fp32, *fp32, *fp32, i32", "*fp32, *fp32, *f32, i32"),
     "unknown type 'f32'"),
    ("kernel.add.grid[0]", lambda t: t.replace('grid = ["cdiv(n, BLOCK)"]', 'grid = ["cdiv(m, BLOCK)"]', 1),
     "names 'm'"),
    ("kernel.add.variant[0].when", lambda t: t.replace('when = "n < 65536"', 'when = "size < 65536"'),
     "names 'size'"),
    ("kernel[1].name", lambda t: t.replace('name = "copy"\n', 'name = "add"\n'), "duplicate kernel name"),
    ("kernel.add.variant[1].constants", lambda t: t.replace("constants = { BLOCK = 1024 }\n\n[[kernel]]\nname = \"copy\"",
                                                            "constants = { }\n\n[[kernel]]\nname = \"copy\""),
     "no value for constexpr parameter(s) BLOCK"),
    ("kernel.add.variant[0].num_warps", lambda t: t.replace("num_warps = 2", "num_warps = 3"),
     "power of two"),
    ("kernel.add.variant[0].specialize", lambda t: t.replace('when = "n < 65536"',
                                                             'when = "n < 65536"\nspecialize = "always"'),
     'expected one of "auto", "none", "aligned", got \'always\''),
    ("kernel.add.signature", lambda t: t.replace("*fp32, *fp32, *fp32, i32", "*fp32, *fp32, i32"),
     "signature has 3 entries but add_kernel has 4 runtime parameters (x_ptr, y_ptr, out_ptr, n)"),
    ("kernel.add.signature", lambda t: t.replace("*fp32, *fp32, *fp32, i32", "*fp32, *fp32, *fp32, i32:3"),
     "hint :3 on n is not supported (use :1, :2, :4, :8 or :16)"),
    ("kernel.add.signature", lambda t: t.replace("*fp32, *fp32, *fp32, i32", "*fp32:1, *fp32, *fp32, i32"),
     "hint :1 needs an integer parameter, x_ptr is pointer<float32>"),
    ("kernel.add.variant[0].num_stages", lambda t: t.replace("num_warps = 2", "num_warps = 2\nnum_stages = 0"),
     "must be at least 1, got 0"),
    ("library.redirect_triton", lambda t: t.replace('out_dir = "build"', 'out_dir = "build"\nredirect_triton = "yes"'),
     "expected true or false"),
]


@pytest.mark.parametrize("key, edit, message", BAD_MANIFESTS, ids=[b[0] + ":" + b[2] for b in BAD_MANIFESTS])
def test_bad_manifest_is_one_line_naming_the_key(tmp_path, key, edit, message):
    project = _project(tmp_path)
    manifest = project / "aotk.toml"
    manifest.write_text(edit(manifest.read_text()))
    result = subprocess.run([sys.executable, "-m", "aotk", "build", str(manifest)], capture_output=True, text=True,
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": tree_pythonpath()})
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(manifest) in lines[0] and key in lines[0] and message in lines[0]
    assert "Traceback" not in result.stderr
    assert not (project / "build").exists()


def test_cli_build_prints_outputs(tmp_path):
    project = _project(tmp_path)
    result = CliRunner().invoke(main, ["build", str(project / "aotk.toml"), "-o",
                                       str(tmp_path / "out"), "-j", "2"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "libexamples.so").exists()
    assert "examples.h" in result.output


def test_inspect_lists_every_variant_and_target(built):
    _, result = built
    output = CliRunner().invoke(main, ["inspect", str(result.library)]).output
    lines = output.strip().splitlines()
    assert lines[0].split() == ["kernel", "variant", "target", "ptx", "registers", "spills",
                                "shared", "vector"]
    # add has 4 builds, copy, copy2d and transpose 2 each, softmax and layer_norm 6 each,
    # row_argmax 4, matmul 6 and matmul_leaky_relu 3 (large tiles aligned only, and for
    # matmul one ":8" build), matmul_descriptor 4 (its two large builds listed by hand),
    # batched_matmul 5 (specialize = "none"); the Triton-C twins add_tc, softmax_tc and
    # layer_norm_tc 4 each, matmul_tc 3; 2 targets: 118 rows.
    assert len(lines) == 1 + 118
    aligned_add = [l for l in lines if "add[BLOCK=1024] aligned" in l and "sm_90" in l][0]
    assert aligned_add.split()[-1] == "4"
    # The large matmul tiles use wgmma on sm_90: the fatbin holds an sm_90a cubin for them
    # (and mma.sync sm_80 code); kernels without a dot stay plain sm_90.
    large = [l.split() for l in lines
             if l.startswith("matmul ") and "BLOCK_SIZE_N=256" in l and "aligned" in l]
    assert sorted(row[-6] for row in large) == ["sm_80", "sm_90a"]
    assert "sm_90a" not in aligned_add and all(row[-3] == "0" for row in large)   # spills
    # LLVM ran once for add: its sm_90 cubin is the sm_80 PTX's; a wgmma kernel's is not.
    assert aligned_add.split()[-6:-4] == ["sm_90", "sm_80"]
    assert sorted((row[-6], row[-5]) for row in large) == [("sm_80", "sm_80"),
                                                           ("sm_90a", "sm_90a")]


def test_build_target_option_replaces_the_manifest_targets(tmp_path):
    """`aotk build --target sm_80` builds for that target alone (as nvcc -arch would); an
    unknown target is one line naming the option, and nothing is written."""
    project = _project(tmp_path)
    result = CliRunner().invoke(main, ["build", str(project / "aotk.toml"), "-o",
                                       str(tmp_path / "out"), "--target", "sm_80"])
    assert result.exit_code == 0, result.output
    rows = CliRunner().invoke(main, ["inspect", str(tmp_path / "out" / "libexamples.so")]).output
    targets = {line.split()[-5] for line in rows.strip().splitlines()[1:]}
    assert targets == {"sm_80"}
    bad = subprocess.run([sys.executable, "-m", "aotk", "build", str(project / "aotk.toml"),
                          "-o", str(tmp_path / "bad"), "--target", "sm_70"],
                         capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": tree_pythonpath()})
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "aotk: error: --target: unknown target 'sm_70'; expected one of sm_75, sm_80, sm_86, "
        "sm_89, sm_90, sm_100, sm_120"]
    assert not (tmp_path / "bad").exists()


def test_every_example_kernel_builds_for_blackwell(tmp_path):
    """sm_100 (B200) and sm_120 (RTX 50): every variant of the root manifest compiles and
    assembles (PTX ISA 8.6 / 8.7, dots on mma.sync), none needs more shared memory than a
    block of that GPU gets (sm_120: 99 KB), and the library names both targets."""
    result = aotk.build(ROOT / "aotk.toml", out_dir=tmp_path / "out",
                        targets=["sm_100", "sm_120"])
    builds = [entry for description in aotk.load(result.library).info["kernels"].values()
              for entry in description["builds"]]
    assert builds and all(set(entry["targets"]) == {"sm_100", "sm_120"} for entry in builds)
    assert all(entry["targets"]["sm_120"]["shared"] <= 99 * 1024 for entry in builds)
    assert max(entry["targets"]["sm_100"]["shared"] for entry in builds) > 99 * 1024


def _many_kernels_manifest(kernels: int) -> str:
    """``kernels`` entries of one source function, each with four variants of which only
    two specializations differ (the `when` conditions are host-side only)."""
    text = '[library]\nname = "many"\ntargets = ["sm_80"]\n'
    for k in range(kernels):
        text += (f'\n[[kernel]]\nname = "add{k}"\nsource = "examples/kernels/add.py"\n'
                 'function = "add_kernel"\nsignature = "*fp32, *fp32, *fp32, i32"\n'
                 'grid = ["cdiv(n, BLOCK)"]\nspecialize = "none"\n')
        for v, block in enumerate((256, 256, 1024, 1024)):
            text += (f'\n[[kernel.variant]]\nwhen = "n > {v}"\n'
                     f'constants = {{ BLOCK = {block} }}\n')
    return text


def test_identical_specializations_are_compiled_and_embedded_once(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / "cache"))
    project = _project(tmp_path)
    (project / "aotk.toml").write_text(_many_kernels_manifest(20))
    result = aotk.build(project / "aotk.toml")
    assert result.compiled == 2   # 80 variants, two specializations
    work = project / "build" / ".aotk" / "many"
    assert len(list(work.glob("*.fatbin"))) == 2
    library = aotk.load(result.library)
    assert library.add7.select(0, 0, 0, 3) == "add7[BLOCK=256]"
    assert library.add19.select(0, 0, 0, 9) == "add19[BLOCK=256]"


def test_outputs_have_the_modes_the_umask_gives_and_a_relocatable_pc(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / "cache"))
    project = _project(tmp_path)
    (project / "aotk.toml").write_text(_many_kernels_manifest(1))
    previous = os.umask(0o022)
    try:
        result = aotk.build(project / "aotk.toml")
    finally:
        os.umask(previous)
    for path in (result.header, result.depfile, result.pkgconfig):
        assert path.stat().st_mode & 0o777 == 0o644, path
    assert result.library.stat().st_mode & 0o777 == 0o755
    pc = result.pkgconfig.read_text()
    assert "libdir=${pcfiledir}" in pc and "includedir=${pcfiledir}" in pc
    assert str(tmp_path) not in pc


def test_variants_that_read_alike_get_unique_names(tmp_path, monkeypatch):
    """Two variants differing only in `when` (specialize = "none") used to share a name."""
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / "cache"))
    project = _project(tmp_path)
    (project / "aotk.toml").write_text(_many_kernels_manifest(1))
    library = aotk.load(aotk.build(project / "aotk.toml").library)
    names = library.add0.description["variants"]
    assert names == ["add0[BLOCK=256]", "add0[BLOCK=256] #1", "add0[BLOCK=1024]",
                     "add0[BLOCK=1024] #3"]
    assert len(set(names)) == len(names)


def test_a_kernel_source_outside_the_manifests_folder_builds(tmp_path):
    """`source = "../kernels/add.py"`: the generated C names it as the manifest does."""
    project = _project(tmp_path)
    (project / "sub").mkdir()
    text = (project / "aotk.toml").read_text().replace('source = "examples/',
                                                      'source = "../examples/')
    (project / "sub" / "aotk.toml").write_text(text)
    result = aotk.build(project / "sub" / "aotk.toml")
    library_c = next((result.library.parent / ".aotk").glob("*/*_library.c")).read_text()
    assert "(../examples/kernels/add.py:add_kernel)" in library_c
