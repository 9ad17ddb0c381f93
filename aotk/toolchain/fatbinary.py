"""cubins + PTX -> one fatbin with NVIDIA's ``fatbinary``.

In: ``{arch: cubin bytes}`` (``sm_90a``: an arch-specific cubin, which runs on sm_90 GPUs
only) and the PTX of the lowest arch. Out: fatbin bytes; the driver picks the SASS matching
the GPU or JIT-compiles the PTX on newer ones. Files are named the
same in every run (no paths leak into the output), so fatbins are reproducible.
"""
from __future__ import annotations

import os
import subprocess
import tempfile

from .errors import ToolchainError
from .locate import announce, find_tool


def _sm(arch: str) -> str:
    return arch.removeprefix("sm_")


def pack(cubins: dict, ptx_arch: str, ptx: str) -> bytes:
    tool = find_tool("fatbinary")
    with tempfile.TemporaryDirectory(prefix="aotk-fatbin-") as work:
        command = [tool.path, "-64", "--create=kernel.fatbin"]
        for arch, cubin in sorted(cubins.items()):
            name = f"{arch}.cubin"
            with open(os.path.join(work, name), "wb") as f:
                f.write(cubin)
            command.append(f"--image3=kind=elf,sm={_sm(arch)},file={name}")
        with open(os.path.join(work, "kernel.ptx"), "w") as f:
            f.write(ptx)
        command.append(f"--image3=kind=ptx,sm={_sm(ptx_arch)},file=kernel.ptx")
        announce(command, cwd=work)
        result = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise ToolchainError(f"fatbinary ({tool.path}) failed: "
                                 f"{(result.stderr or result.stdout).strip()}")
        with open(os.path.join(work, "kernel.fatbin"), "rb") as f:
            return f.read()
