"""Small projects the build tests write: one add kernel (``ADD_KERNEL``) and its manifest;
a copy of the example kernels and the root manifest (``root_project``)."""
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ADD_KERNEL = """\
import aotk
import aotk.language as tl


@aotk.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)
"""


def add_manifest(name: str = "small", source: str = "add.py", blocks=(256,)) -> str:
    """A library ``name`` for sm_80 with kernel ``add`` (``add_kernel`` of ``source``), one
    variant per BLOCK of ``blocks``."""
    text = (f'[library]\nname = "{name}"\ntargets = ["sm_80"]\n\n[[kernel]]\nname = "add"\n'
            f'source = "{source}"\nfunction = "add_kernel"\n'
            'signature = "*fp32, *fp32, *fp32, i32"\ngrid = ["cdiv(n, BLOCK)"]\n')
    return text + "".join(f"\n[[kernel.variant]]\nconstants = {{ BLOCK = {block} }}\n"
                          for block in blocks)


def root_project(tmp_path: Path, name: str = "proj") -> Path:
    """A copy of the example kernels and the root manifest under ``tmp_path / name``."""
    project = tmp_path / name
    shutil.copytree(ROOT / "examples" / "kernels", project / "examples" / "kernels")
    shutil.copy(ROOT / "aotk.toml", project / "aotk.toml")
    return project
