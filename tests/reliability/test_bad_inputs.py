"""Bad manifests and kernels, each run through ``aotk build`` as a user would: the status is 1,
stderr has exactly one ``aotk: error:`` line, which names the file and the key (or the
line), and no traceback; nothing is written to the output folder."""
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from aotk_cli.main import main

KERNELS = {
    "add.py": """
        import aotk
        import aotk.language as tl


        @aotk.jit
        def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


        def not_a_kernel():
            pass
    """,
    "scaled.py": """
        import aotk
        import aotk.language as tl


        @aotk.jit
        def scaled(x_ptr, scale, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) * scale)
    """,
    "keyword_param.py": """
        import aotk
        import aotk.language as tl


        @aotk.jit
        def kernel(x_ptr, grid, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), grid)
    """,
    "raises.py": """
        raise RuntimeError("not today")
    """,
    "exits.py": """
        import sys
        sys.exit(3)
    """,
    "syntax.py": """
        def broken(:
            pass
    """,
    "bad_kernel.py": """
        import aotk
        import aotk.language as tl


        @aotk.jit
        def kernel(x_ptr, n, BLOCK: tl.constexpr):
            x = tl.load(x_ptr + tl.arange(0, BLOCK), other=0.0)
            tl.store(x_ptr + tl.arange(0, BLOCK), x)
    """,
    "notes.txt": "hello\n",
}

LIBRARY = """
[library]
name = "t"
targets = ["sm_80"]
"""

ADD = """
[[kernel]]
name = "add"
source = "add.py"
function = "add_kernel"
signature = "*fp32, *fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
"""

VARIANT = """
[[kernel.variant]]
constants = { BLOCK = 256 }
"""

GOOD = LIBRARY + ADD + VARIANT


def _kernel(**changes) -> str:
    """The add kernel's table with keys replaced (None removes one)."""
    lines = {line.split(" = ")[0]: line for line in ADD.strip().splitlines()[1:]}
    for key, value in changes.items():
        if value is None:
            lines.pop(key, None)
        else:
            lines[key] = f"{key} = {value}"
    return "\n[[kernel]]\n" + "\n".join(lines.values()) + "\n"


# (case id, manifest text, regex the error line must match after "aotk: error: ")
CASES = [
    ("invalid TOML", "[library\nname = 1", r"aotk\.toml: invalid TOML"),
    ("no library table", ADD + VARIANT, r"aotk\.toml: library: missing \[library\] table"),
    ("unknown top-level key", GOOD + "\n[extra]\nx = 1\n", r"aotk\.toml: .*extra"),
    ("library name missing", '[library]\ntargets = ["sm_80"]\n' + ADD + VARIANT,
     r"aotk\.toml: library\.name"),
    ("library name not an identifier", LIBRARY.replace('"t"', '"my-lib"') + ADD + VARIANT,
     r"aotk\.toml: library\.name"),
    ("library name a number", LIBRARY.replace('"t"', "3") + ADD + VARIANT,
     r"aotk\.toml: library\.name"),
    ("targets empty", LIBRARY.replace('["sm_80"]', "[]") + ADD + VARIANT,
     r"aotk\.toml: library\.targets"),
    ("target unknown", LIBRARY.replace("sm_80", "sm_70") + ADD + VARIANT,
     r"aotk\.toml: library\.targets.*sm_70"),
    ("targets a string", LIBRARY.replace('["sm_80"]', '"sm_80"') + ADD + VARIANT,
     r"aotk\.toml: library\.targets"),
    ("unknown library key", LIBRARY + "colour = 1\n" + ADD + VARIANT,
     r"aotk\.toml: library.*colour"),
    ("out_dir a number", LIBRARY + "out_dir = 3\n" + ADD + VARIANT,
     r"aotk\.toml: library\.out_dir"),
    ("redirect_triton not a bool", LIBRARY + 'redirect_triton = "yes"\n' + ADD + VARIANT,
     r"aotk\.toml: library\.redirect_triton"),
    ("no kernel", LIBRARY, r"aotk\.toml: kernel: expected at least one"),
    ("kernel not a table list", 'kernel = "add"\n' + LIBRARY, r"aotk\.toml: kernel"),
    ("kernel name missing", LIBRARY + _kernel(name=None) + VARIANT,
     r"aotk\.toml: kernel\[0\]\.name: missing"),
    ("kernel source missing", LIBRARY + _kernel(source=None) + VARIANT,
     r"aotk\.toml: kernel\.add\.source: missing"),
    ("kernel function missing", LIBRARY + _kernel(function=None) + VARIANT,
     r"aotk\.toml: kernel\.add\.function: missing"),
    ("kernel signature missing", LIBRARY + _kernel(signature=None) + VARIANT,
     r"aotk\.toml: kernel\.add\.signature: missing"),
    ("kernel grid missing", LIBRARY + _kernel(grid=None) + VARIANT,
     r"aotk\.toml: kernel\.add\.grid: missing"),
    ("unknown kernel key", LIBRARY + _kernel(colour="1") + VARIANT,
     r"aotk\.toml: kernel\.add.*colour"),
    ("kernel name not a C identifier", LIBRARY + _kernel(name='"add-2"') + VARIANT,
     r"aotk\.toml: kernel\.add-2\.name"),
    ("duplicate kernel names", GOOD + _kernel() + VARIANT,
     r"aotk\.toml: kernel\[1\]\.name: duplicate kernel name 'add'"),
    ("kernel name clashes with a selector", GOOD + _kernel(name='"add_select"') + VARIANT,
     r"aotk\.toml: kernel\.add_select\.name: its C launcher t_add_select is also "
     r"kernel\.add's selector"),
    ("kernel named like the library's last_error", LIBRARY + _kernel(name='"last_error"')
     + VARIANT, r"aotk\.toml: kernel\.last_error\.name: .*the library's last_error\(\)"),
    ("kernel named info", LIBRARY + _kernel(name='"info"') + VARIANT,
     r"aotk\.toml: kernel\.info\.name: .*the library's info\(\)"),
    ("kernel named variants", LIBRARY + _kernel(name='"variants"') + VARIANT,
     r"aotk\.toml: kernel\.variants\.name: .*variant table"),
    ("kernel named like a fatbin", LIBRARY + _kernel(name='"fatbin_0"') + VARIANT,
     r"aotk\.toml: kernel\.fatbin_0\.name: .*fatbins"),
    ("kernel clashes with variant_name", GOOD + _kernel(name='"add_variant_name"') + VARIANT,
     r"aotk\.toml: kernel\.add_variant_name\.name: .*kernel\.add's variant_name\(\)"),
    ("source does not exist", LIBRARY + _kernel(source='"nope.py"') + VARIANT,
     r"aotk\.toml: kernel\.add\.source: .*nope\.py does not exist"),
    ("source not a Python file", LIBRARY + _kernel(source='"notes.txt"') + VARIANT,
     r"aotk\.toml: kernel\.add\.source: .*notes\.txt is neither a Python file \(\.py\) "
     r"nor Triton-C"),
    ("function not in the module", LIBRARY + _kernel(function='"mul_kernel"') + VARIANT,
     r"aotk\.toml: kernel\.add\.function: .*'mul_kernel' is not an @aotk\.jit function"),
    ("function not a kernel", LIBRARY + _kernel(function='"not_a_kernel"') + VARIANT,
     r"aotk\.toml: kernel\.add\.function: .*'not_a_kernel' is not an @aotk\.jit function"),
    ("module raises at import", LIBRARY + _kernel(source='"raises.py"') + VARIANT,
     r"aotk\.toml: kernel\.add\.function: .*raises\.py: cannot import: RuntimeError: "
     r"not today"),
    ("module calls sys.exit", LIBRARY + _kernel(source='"exits.py"') + VARIANT,
     r"aotk\.toml: kernel\.add\.function: .*exits\.py: cannot import: it called "
     r"sys\.exit\(3\)"),
    ("module has a syntax error", LIBRARY + _kernel(source='"syntax.py"') + VARIANT,
     r"aotk\.toml: kernel\.add\.function: .*syntax\.py: cannot import: SyntaxError"),
    ("signature entries too few", LIBRARY + _kernel(signature='"*fp32, *fp32"') + VARIANT,
     r"aotk\.toml: kernel\.add\.signature: signature has 2 entries but"),
    ("signature unknown type", LIBRARY + _kernel(signature='"*fp32, *fp32, *fp32, i33"')
     + VARIANT, r"aotk\.toml: kernel\.add\.signature: unknown type 'i33'"),
    ("signature bad hint", LIBRARY + _kernel(signature='"*fp32:3, *fp32, *fp32, i32"')
     + VARIANT, r"aotk\.toml: kernel\.add\.signature: hint :3"),
    ("signature hint on a float", LIBRARY + _kernel(
        source='"scaled.py"', function='"scaled"', signature='"*fp32, fp32:16, i32"',
        grid='["1"]') + VARIANT, r"aotk\.toml: kernel\.add\.signature: float parameter"),
    ("signature not a string", LIBRARY + _kernel(signature="3") + VARIANT,
     r"aotk\.toml: kernel\.add\.signature"),
    ("malformed tensor descriptor", LIBRARY + _kernel(
        signature='"tensordesc<fp32[16, x]>, *fp32, *fp32, i32"') + VARIANT,
     r"aotk\.toml: kernel\.add\.signature: x_ptr: the block shape"),
    ("grid not a list", LIBRARY + _kernel(grid='"n"') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid: expected a list of 1 to 3"),
    ("grid of four axes", LIBRARY + _kernel(grid='["1", "1", "1", "1"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid: expected a list of 1 to 3"),
    ("grid expression empty", LIBRARY + _kernel(grid='[""]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid\[0\]: expected a C expression"),
    ("grid names an unknown name", LIBRARY + _kernel(grid='["cdiv(m, BLOCK)"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid\[0\]: .*names 'm'"),
    ("grid names a pointer", LIBRARY + _kernel(grid='["x_ptr"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid\[0\]: .*names 'x_ptr'"),
    ("grid unbalanced", LIBRARY + _kernel(grid='["cdiv(n, BLOCK"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid\[0\]: unbalanced parentheses"),
    ("grid bad character", LIBRARY + _kernel(grid='["n $ 2"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid\[0\]: cannot parse"),
    ("grid divides by zero", LIBRARY + _kernel(grid='["n / 0"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid\[0\]: 'n / 0' divides by zero"),
    ("grid divides by a constant zero", LIBRARY + _kernel(grid='["n / (BLOCK - 256)"]')
     + VARIANT, r"aotk\.toml: kernel\.add\.grid\[0\]: .*divides by zero"),
    ("grid cdiv by zero", LIBRARY + _kernel(grid='["cdiv(n, 0)"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid\[0\]: .*divides by zero"),
    ("grid modulo of a float", LIBRARY + _kernel(
        source='"scaled.py"', function='"scaled"', signature='"*fp32, fp32, i32"',
        grid='["scale % 2"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.grid\[0\]: .*% needs integers"),
    ("when divides by zero", GOOD.replace("constants = { BLOCK = 256 }",
                                          'constants = { BLOCK = 256 }\nwhen = "n % 0 == 1"'),
     r"aotk\.toml: kernel\.add\.variant\[0\]\.when: .*divides by zero"),
    ("when names an unknown name", GOOD.replace(
        "constants = { BLOCK = 256 }", 'constants = { BLOCK = 256 }\nwhen = "size > 2"'),
     r"aotk\.toml: kernel\.add\.variant\[0\]\.when: .*names 'size'"),
    ("num_warps not a power of two", LIBRARY + _kernel(num_warps="3") + VARIANT,
     r"aotk\.toml: kernel\.add\.num_warps: must be a power of two"),
    ("num_warps too many", LIBRARY + _kernel(num_warps="64") + VARIANT,
     r"aotk\.toml: kernel\.add\.num_warps: must be a power of two from 1 to 32"),
    ("num_warps a string", LIBRARY + _kernel(num_warps='"4"') + VARIANT,
     r"aotk\.toml: kernel\.add\.num_warps: expected an integer"),
    ("num_stages negative", LIBRARY + _kernel(num_stages="-5") + VARIANT,
     r"aotk\.toml: kernel\.add\.num_stages: must be at least 1, got -5"),
    ("num_stages of a variant zero", GOOD.replace(
        "constants = { BLOCK = 256 }", "constants = { BLOCK = 256 }\nnum_stages = 0"),
     r"aotk\.toml: kernel\.add\.variant\[0\]\.num_stages: must be at least 1"),
    ("maxnreg too small", LIBRARY + _kernel(maxnreg="8") + VARIANT,
     r"aotk\.toml: kernel\.add\.maxnreg: must be from 16 to 255"),
    ("specialize unknown", LIBRARY + _kernel(specialize='"sometimes"') + VARIANT,
     r"aotk\.toml: kernel\.add\.specialize: expected one of"),
    ("contiguous of a number", LIBRARY + _kernel(contiguous="1") + VARIANT,
     r"aotk\.toml: kernel\.add\.contiguous: expected true or a list of pointer parameter"),
    ("contiguous naming a scalar", LIBRARY + _kernel(contiguous='["n"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.contiguous\[0\]: 'n' is a parameter of type i32, not a "
     r"pointer"),
    ("strides naming no parameter", LIBRARY + _kernel(strides='{ x_ptr = ["x_stride", 1] }')
     + VARIANT, r"aotk\.toml: kernel\.add\.strides\.x_ptr\[0\]: 'x_stride' is not a "
     r"parameter of the kernel"),
    ("constants not a table", LIBRARY + ADD + "\n[[kernel.variant]]\nconstants = 3\n",
     r"aotk\.toml: kernel\.add\.variant\[0\]\.constants: expected an inline table"),
    ("constant of a list", LIBRARY + ADD + "\n[[kernel.variant]]\nconstants = { BLOCK = [1] }\n",
     r"aotk\.toml: kernel\.add\.variant\[0\]\.constants\.BLOCK: unsupported value"),
    ("constexpr without a value", LIBRARY + ADD + "\n[[kernel.variant]]\nnum_warps = 4\n",
     r"aotk\.toml: kernel\.add\.variant\[0\]\.constants: no value for constexpr "
     r"parameter\(s\) BLOCK"),
    ("constant that is not a constexpr", LIBRARY + ADD
     + "\n[[kernel.variant]]\nconstants = { BLOCK = 256, n = 4 }\n",
     r"aotk\.toml: kernel\.add\.variant\[0\]\.constants: n is not a tl\.constexpr"),
    ("unknown variant key", GOOD.replace("constants = { BLOCK = 256 }",
                                         "constants = { BLOCK = 256 }\ncolour = 1"),
     r"aotk\.toml: kernel\.add\.variant\[0\].*colour"),
    ("repeated variant", GOOD + VARIANT,
     r"aotk\.toml: kernel\.add\.variant\[1\]: repeats variant\[0\]"),
    ("parameter named like a local of the generated C", LIBRARY + _kernel(
        source='"keyword_param.py"', function='"kernel"', signature='"*fp32, i32"',
        grid='["1"]') + VARIANT,
     r"aotk\.toml: kernel\.add\.function: parameter 'grid' of kernel is a C keyword"),
    ("kernel that does not compile", LIBRARY + _kernel(
        source='"bad_kernel.py"', function='"kernel"', signature='"*fp32, i32"',
        grid='["1"]') + VARIANT,
     r"bad_kernel\.py:\d+:\d+: error: `other` needs a `mask`"),
]


@pytest.fixture
def project(tmp_path):
    for name, text in KERNELS.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip())
    return tmp_path


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 60
    assert len({case for case, _, _ in CASES}) == len(CASES)


def _build(project: Path, manifest: str, env=None):
    (project / "aotk.toml").write_text(manifest)
    runner = CliRunner()
    return runner.invoke(main, ["build", str(project / "aotk.toml")], env=env)


@pytest.mark.parametrize("case,manifest,expected", CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_is_one_error_line_naming_it(project, case, manifest, expected):
    result = _build(project, manifest)
    assert result.exit_code == 1, (case, result.output)
    errors = [line for line in result.output.splitlines() if line.startswith("aotk: error: ")]
    assert len(errors) == 1, result.output
    assert re.search(expected, errors[0]), errors[0]
    assert "Traceback" not in result.output
    assert not (project / "build").exists()


def test_a_cache_folder_that_is_a_file_is_one_error_line(project):
    (project / "cache").write_text("")
    result = _build(project, GOOD, env={"AOTK_CACHE_DIR": str(project / "cache")})
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"aotk: error: the cache folder {project / 'cache'} (AOTK_CACHE_DIR or ~/.cache/aotk) "
        "is not a folder")


def test_an_output_folder_that_is_a_file_is_one_error_line(project):
    (project / "out").write_text("")
    result = _build(project, LIBRARY + 'out_dir = "out/lib"\n' + ADD + VARIANT)
    assert result.exit_code == 1 and "Traceback" not in result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("aotk: error:")]
    assert line.endswith(f"the output folder {project / 'out' / 'lib'} cannot be made: "
                         f"{project / 'out'} is a file (-o, or library.out_dir)")


def test_the_good_manifest_of_the_corpus_builds(project, tmp_path):
    result = _build(project, GOOD, env={"AOTK_CACHE_DIR": str(tmp_path / "aotk-cache")})
    assert result.exit_code == 0, result.output
    assert (project / "build" / "libt.so").is_file()
