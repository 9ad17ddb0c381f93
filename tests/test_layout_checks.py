"""Declared pointer layouts (``contiguous`` / ``strides`` in a [[kernel]] table): manifest
errors, what the built library says of them (info JSON, header), and ``aotk.load``'s check at
call time. On the CPU: refusals, before any launch, of ``__cuda_array_interface__`` objects
and torch tensors laid out otherwise; matching arrays and raw addresses launched on the
stand-in driver (tests/programs/fake_libcuda.c). On the GPU: torch CUDA tensors, through
the fast path, the general path and ``aotk.torch``'s operators."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aotk
from aotk.buildsys.manifest import ManifestError, load_manifest
from aotk.buildsys.plan import plan_builds
from aotk.ir.pointer_layouts import PointerLayout
from aotk.launch.arguments import check_layouts
from tests.conftest import tree_pythonpath

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "examples" / "kernels"

MANIFEST = """
[library]
name = "layouts"
targets = ["sm_80"]

[[kernel]]
name = "add"
source = "add.py"
function = "add_kernel"
signature = "*fp32, *fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
constants = {{ BLOCK = 256 }}
specialize = "none"
contiguous = true

[[kernel]]
name = "softmax"
source = "softmax.py"
function = "softmax_kernel"
signature = "*fp32, *fp32, i32, i32, i32, i32"
grid = ["n_rows"]
constants = {{ BLOCK = 1024 }}
specialize = "none"
{softmax}

[[kernel]]
name = "copy"
source = "copy.py"
function = "copy_kernel"
signature = "*fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
constants = {{ BLOCK = 1024 }}
specialize = "none"
"""
SOFTMAX_LAYOUT = 'strides = { out_ptr = ["out_row_stride", 1], in_ptr = ["in_row_stride", 1] }'


def _project(folder: Path, softmax: str = SOFTMAX_LAYOUT) -> Path:
    for name in ("add.py", "softmax.py", "copy.py", "layer_norm.tc"):
        shutil.copy(KERNELS / name, folder / name)
    (folder / "aotk.toml").write_text(MANIFEST.format(softmax=softmax))
    return folder / "aotk.toml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return aotk.build(_project(tmp_path_factory.mktemp("layouts")))


@pytest.fixture(scope="module")
def lib(built):
    return aotk.load(built.library)


# -- the manifest ---------------------------------------------------------------------------

@pytest.mark.parametrize("softmax, key, message", [
    ("contiguous = 3", "contiguous", "expected true or a list of pointer parameter names"),
    ("contiguous = [\"in_pointer\"]", r"contiguous\[0\]",
     "'in_pointer' is not a parameter of the kernel; did you mean 'in_ptr'"),
    ("contiguous = [\"n_rows\"]", r"contiguous\[0\]",
     "'n_rows' is a parameter of type i32, not a pointer"),
    ("strides = [\"in_row_stride\", 1]", "strides", "expected an inline table"),
    ("strides = { in_ptr = \"in_row_stride\" }", "strides.in_ptr",
     "expected a list with one entry per dimension"),
    ("strides = { in_ptr = [] }", "strides.in_ptr", "expected a list"),
    ("strides = { in_ptr = [\"in_row_stride\", true] }", r"strides.in_ptr\[1\]",
     "expected the name of an integer parameter or a stride of 0 or more, got True"),
    ("strides = { in_ptr = [\"in_row_stride\", -1] }", r"strides.in_ptr\[1\]", "got -1"),
    ("strides = { in_ptr = [\"BLOCK\", 1] }", r"strides.in_ptr\[0\]",
     "'BLOCK' is not a parameter of the kernel; a stride is an integer parameter or a number"),
    ("strides = { in_ptr = [\"out_ptr\", 1] }", r"strides.in_ptr\[0\]",
     r"'out_ptr' is a parameter of type \*fp32"),
    ("strides = { n_cols = [\"in_row_stride\", 1] }", "strides.n_cols",
     "'n_cols' is a parameter of type i32, not a pointer"),
    ("contiguous = [\"in_ptr\"]\n" + SOFTMAX_LAYOUT, r"contiguous\[0\]",
     "'in_ptr' also has `strides`; keep one of the two"),
    ("contiguos = true", "contiguos", "unknown key; did you mean 'contiguous'"),
])
def test_a_bad_declaration_is_one_manifest_error_naming_the_kernel_and_key(
        tmp_path, softmax, key, message):
    manifest = _project(tmp_path, softmax)
    with pytest.raises(ManifestError, match=rf"aotk.toml: kernel.softmax.{key}: .*{message}"):
        plan_builds(load_manifest(manifest))


def _layouts_of(tmp_path, table: str, kernel: str = "softmax") -> tuple:
    manifest = _project(tmp_path)
    manifest.write_text(manifest.read_text() + textwrap.dedent(table))
    plans = plan_builds(load_manifest(manifest))
    return {plan.kernel.name: plan.pointer_layouts for plan in plans}[kernel]


def test_contiguous_true_is_every_pointer_not_given_strides_in_parameter_order(tmp_path):
    plans = {plan.kernel.name: plan for plan in plan_builds(load_manifest(_project(
        tmp_path, "contiguous = true\nstrides = { in_ptr = [\"in_row_stride\", 1] }")))}
    assert plans["softmax"].pointer_layouts == (PointerLayout("out_ptr"),
                                        PointerLayout("in_ptr", ("in_row_stride", 1)))
    assert plans["add"].pointer_layouts == tuple(map(PointerLayout, ("x_ptr", "y_ptr", "out_ptr")))
    assert plans["copy"].pointer_layouts == ()


def test_a_triton_c_kernel_declares_over_the_parameters_its_c_signature_gives(tmp_path):
    pytest.importorskip("lark")   # the tritonc extra
    pytest.importorskip("pcpp")
    table = """
    [[kernel]]
    name = "layer_norm"
    source = "layer_norm.tc"
    function = "layer_norm_fwd_kernel"
    grid = ["M"]
    constants = { BLOCK_SIZE = 1024 }
    strides = { X = ["stride", 1], Y = ["stride", 1] }
    contiguous = ["W", "B"]
    """
    assert _layouts_of(tmp_path, table, "layer_norm") == (
        PointerLayout("X", ("stride", 1)), PointerLayout("Y", ("stride", 1)),
        PointerLayout("W"), PointerLayout("B"))
    with pytest.raises(ManifestError, match=r"kernel.layer_norm.strides.X\[0\]: 'eps' is a "
                                            "parameter of type fp32"):
        _layouts_of(tmp_path, table.replace('X = ["stride", 1]', 'X = ["eps", 1]'), "layer_norm")


def test_a_descriptors_parts_take_their_layout_from_the_descriptor(tmp_path):
    (tmp_path / "scale.py").write_text(textwrap.dedent("""
        import aotk
        import aotk.language as tl


        @aotk.jit
        def scale_tiles(in_desc, out_ptr, factor, BLOCK_M: tl.constexpr):
            row = tl.program_id(0) * BLOCK_M
            tile = in_desc.load([row, 0])
            rows = row + tl.arange(0, BLOCK_M)[:, None]
            tl.store(out_ptr + rows * 32 + tl.arange(0, 32)[None, :], tile * factor)
        """))
    table = """
    [[kernel]]
    name = "scale"
    source = "scale.py"
    function = "scale_tiles"
    signature = "tensordesc<fp32[16, 32]>, *fp32, fp32"
    grid = ["cdiv(in_desc_shape0, BLOCK_M)"]
    constants = { BLOCK_M = 16 }
    contiguous = true
    """
    assert _layouts_of(tmp_path, table, "scale") == (PointerLayout("out_ptr"),)
    with pytest.raises(ManifestError, match=r"kernel.scale.contiguous\[0\]: 'in_desc_base' is "
                                            "part of the tensor descriptor 'in_desc'"):
        _layouts_of(tmp_path, table.replace("contiguous = true",
                                            'contiguous = ["in_desc_base"]'), "scale")


# -- what the library says ------------------------------------------------------------------

def test_the_info_json_carries_the_declared_layouts(lib):
    kernels = lib.info["kernels"]
    assert kernels["softmax"]["pointer_layouts"] == {"out_ptr": {"strides": ["out_row_stride", 1]},
                                             "in_ptr": {"strides": ["in_row_stride", 1]}}
    assert kernels["add"]["pointer_layouts"] == {name: {"contiguous": True}
                                         for name in ("x_ptr", "y_ptr", "out_ptr")}
    assert kernels["copy"]["pointer_layouts"] == {}


def test_the_header_says_the_layouts_above_the_launcher(built):
    header = built.header.read_text()
    assert ("/* softmax: 1 variant(s), grid (n_rows)\n"
            " * pointer layouts (strides in elements; aotk.load checks them, a C caller must "
            "keep them):\n"
            " *   out_ptr: strides (out_row_stride, 1)\n"
            " *   in_ptr: strides (in_row_stride, 1) */\n"
            "LAYOUTS_API int layouts_softmax(") in header
    assert " *   x_ptr: contiguous (dense row-major)\n" in header
    assert "/* copy: 1 variant(s), grid (cdiv(n, BLOCK)) */\n" in header


def test_the_fast_caller_checks_layouts_only_where_the_kernel_declares_some(lib):
    """The launcher compiled per kernel: no layout code (no cost) for a kernel without
    declarations."""
    def names(kernel):
        return set(type(kernel).__call__.__code__.co_names)
    assert "is_contiguous" in names(lib.add) and "stride" not in names(lib.add)
    assert "stride" in names(lib.softmax) and "is_contiguous" not in names(lib.softmax)
    assert not {"stride", "is_contiguous"} & names(lib.copy)


# -- the check, on the CPU -------------------------------------------------------------------

class CudaArray:
    """A CUDA array as ``__cuda_array_interface__`` describes it (strides in bytes; None:
    dense row-major). Its address is never read: refused calls launch nothing, and the
    others run on the stand-in driver."""

    def __init__(self, shape, strides=None, address=1 << 20, typestr="<f4"):
        self.interface = {"data": (address, False), "shape": tuple(shape), "typestr": typestr,
                          "strides": None if strides is None else tuple(strides), "version": 3}

    @property
    def __cuda_array_interface__(self):
        return self.interface


@pytest.mark.parametrize("stream", [None, 0])
def test_an_array_laid_out_otherwise_is_a_value_error_naming_it(lib, stream):
    rows = CudaArray((64, 1000), (8000, 4))
    every_other = CudaArray((64, 1000), (8000, 8))
    with pytest.raises(ValueError, match=r"^layouts_softmax: argument 'in_ptr' must have strides "
                                         r"\(in_row_stride=1000, 1\), got \(2000, 2\)$"):
        lib.softmax(rows, every_other, 1000, 2000, 64, 1000, stream=stream)
    with pytest.raises(ValueError, match=r"argument 'out_ptr' must have strides "
                                         r"\(out_row_stride=1024, 1\), got \(2000, 1\)"):
        lib.softmax(CudaArray((64, 1000), (8000, 4)), rows, 1000, 1024, 64, 1000)
    with pytest.raises(ValueError, match=r"argument 'in_ptr' must have 2 dimension\(s\), "
                                         r"strides \(in_row_stride=1000, 1\), got a tensor of "
                                         r"shape \(64000,\)"):
        lib.softmax(rows, CudaArray((64000,)), 1000, 2000, 64, 1000, stream=stream)
    transposed = CudaArray((1000, 64), (4, 4000))
    with pytest.raises(ValueError, match=r"^layouts_add: argument 'y_ptr' must be contiguous "
                                         r"\(row-major strides \(64, 1\) for shape \(1000, 64\)\), "
                                         r"got strides \(1, 1000\); pass .contiguous\(\)$"):
        lib.add(CudaArray((64000,)), transposed, CudaArray((64000,)), 64000, stream=stream)


def test_torch_tensors_are_read_by_shape_and_stride_and_size_1_dimensions_never_fail():
    torch = pytest.importorskip("torch")
    softmax = (PointerLayout("out_ptr", ("out_row_stride", 1)),
               PointerLayout("in_ptr", ("in_row_stride", 1)))
    wide = torch.zeros(64, 2000)

    def check(out, x, in_row_stride, out_row_stride=1000):
        check_layouts("softmax", softmax, {"out_ptr": out, "in_ptr": x, "in_row_stride":
                                           in_row_stride, "out_row_stride": out_row_stride})
    out = torch.zeros(64, 1000)
    check(out, wide[:, :1000], 2000)   # a view of every row's first 1000: a strided tensor
    with pytest.raises(ValueError, match=r"^softmax: argument 'in_ptr' must have strides "
                                         r"\(in_row_stride=1000, 1\), got \(2000, 2\)$"):
        check(out, wide[:, ::2], 1000)
    check(out, wide[:1, ::2][:, :1], 5)   # one row of one element: no stride matters
    check(out, torch.zeros(0, 1000), 7)   # no element: no stride matters
    with pytest.raises(ValueError, match="must be contiguous"):
        check_layouts("add", (PointerLayout("x_ptr"),), {"x_ptr": wide.t()})
    check_layouts("add", (PointerLayout("x_ptr"),), {"x_ptr": wide[3]})


def test_dtype_and_device_are_checked_before_the_layout(lib):
    torch = pytest.importorskip("torch")
    strided = torch.zeros(64, 2000)[:, ::2]
    with pytest.raises(TypeError, match="'in_ptr' is a torch.float16 tensor"):
        lib.softmax(strided, strided.half(), 1000, 1000, 64, 1000)
    with pytest.raises(ValueError, match="'out_ptr' is a tensor in CPU memory"):
        lib.softmax(strided, strided, 1000, 1000, 64, 1000)


ACCEPTED = """
import sys
from tests.test_layout_checks import CudaArray
import aotk
lib = aotk.load(sys.argv[1])
wide_rows = CudaArray((64, 1000), (8000, 4))          # rows of 2000, the first 1000 of each
lib.softmax(CudaArray((64, 1000)), wide_rows, 2000, 1000, 64, 1000)
lib.softmax(CudaArray((1, 1000), (4, 4)), CudaArray((1, 1000)), 1000, 1000, 1, 1000, stream=0)
lib.softmax(1 << 20, 2 << 20, 12345, 1000, 64, 1000)   # raw addresses: nothing to check
lib.add(CudaArray((4, 16)), CudaArray((64,)), 3 << 20, 64)
lib.copy(CudaArray((16, 4), (4, 64)), CudaArray((64,)), 64)   # no declaration
"""


def test_matching_arrays_and_raw_addresses_launch(built, tmp_path):
    subprocess.run(["cc", "-shared", "-fPIC", "-Wall", "-Werror", "-o",
                    str(tmp_path / "libcuda.so.1"), str(ROOT / "tests" / "programs" /
                                                        "fake_libcuda.c")], check=True)
    log = tmp_path / "log"
    run = subprocess.run([sys.executable, "-c", ACCEPTED, str(built.library)],
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": tree_pythonpath(),
                              "LD_LIBRARY_PATH": str(tmp_path), "FAKE_CUDA_LOG": str(log),
                              "FAKE_CUDA_BINARY_VERSION": "80"})
    assert run.returncode == 0, run.stderr
    launches = [line.split(" with ")[0] for line in log.read_text().splitlines()
                if line.startswith("launch")]
    assert launches == ["launch 64 blocks of 128 threads", "launch 1 blocks of 128 threads",
                        "launch 64 blocks of 128 threads", "launch 1 blocks of 128 threads",
                        "launch 1 blocks of 128 threads"]


# -- on the GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
def test_on_the_gpu_a_strided_view_that_matches_runs_and_one_that_does_not_is_refused(lib):
    torch = pytest.importorskip("torch")
    wide = torch.randn(64, 2000, device="cuda") * 4
    x = wide[:, 500:1500]                       # strides (2000, 1): what the kernel takes
    out = torch.full((64, 1000), float("nan"), device="cuda")
    for _ in range(3):   # the first call binds torch's dtypes; the others take the fast path
        lib.softmax(out, x, 2000, 1000, 64, 1000)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.softmax(x, dim=1))
    for stream in (None, 0):   # the fast path, then the general one
        with pytest.raises(ValueError, match=r"layouts_softmax: argument 'in_ptr' must have "
                                             r"strides \(in_row_stride=2000, 1\), got \(2000, 2\)"):
            lib.softmax(out, wide[:, ::2], 2000, 1000, 64, 1000, stream=stream)
        with pytest.raises(ValueError, match=r"argument 'out_ptr' must have strides "
                                             r"\(out_row_stride=1024, 1\), got \(1000, 1\)"):
            lib.softmax(out, x, 2000, 1024, 64, 1000, stream=stream)
        with pytest.raises(ValueError, match="layouts_add: argument 'x_ptr' must be contiguous"):
            lib.add(wide.t(), wide, wide, wide.numel(), stream=stream)
    row = torch.randn(1, 1000, device="cuda")
    one = torch.empty(1, 1000, device="cuda")
    lib.softmax(one, row, 123, 1000, 1, 1000)   # one row: its stride is never used
    torch.cuda.synchronize()
    torch.testing.assert_close(one, torch.softmax(row, dim=1))


@pytest.mark.gpu
def test_on_the_gpu_the_torch_operators_check_layouts_too(lib):
    torch = pytest.importorskip("torch")
    ops = aotk.torch.register(lib, namespace="aotk_test_layouts")
    wide = torch.randn(8, 2048, device="cuda")
    out = torch.empty(8, 1024, device="cuda")
    ops.softmax(out, wide[:, :1024], 2048, 1024, 8, 1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.softmax(wide[:, :1024], dim=1))
    with pytest.raises(ValueError, match="argument 'in_ptr' must have strides"):
        ops.softmax(out, wide[:, ::2], 2048, 1024, 8, 1024)
