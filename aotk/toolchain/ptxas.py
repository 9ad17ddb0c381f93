"""PTX -> cubin with ptxas, and what ptxas reports (registers, spills, shared memory).

In: PTX text and an ``sm_XY`` arch. Out: cubin bytes and an info dict. A rejected PTX
raises ``ToolchainError`` carrying ptxas's message and the arch.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass

from ..targets import MAX_REGISTERS_PER_THREAD, REGISTERS_PER_BLOCK
from .errors import ToolchainError
from .locate import announce, find_tool


@dataclass(frozen=True)
class ToolInfo:
    path: str
    origin: str    # "AOTK_PTXAS", "nvidia-cuda-nvcc wheel", "PATH" or "/usr/local/cuda"
    version: str   # e.g. "13.0.88", or ptxas's own last line when it is not recognized


def reset_caches():
    """Forgets the tools found so far, so that changed ``AOTK_*`` variables take effect."""
    from .libdevice import find_libdevice
    find_tool.cache_clear()
    find_ptxas.cache_clear()
    ptxas_gpu_names.cache_clear()
    find_libdevice.cache_clear()


@functools.lru_cache(maxsize=None)
def find_ptxas() -> ToolInfo:
    tool = find_tool("ptxas")
    try:
        output = subprocess.run([tool.path, "--version"], capture_output=True, text=True,
                                timeout=60).stdout
    except OSError as exc:
        raise ToolchainError(f"cannot run {tool.path} ({tool.origin}): {exc}") from None
    match = re.search(r"release [\d.]+, V([\d.]+)", output)
    if match:
        return ToolInfo(tool.path, tool.origin, match.group(1))
    lines = output.strip().splitlines()
    return ToolInfo(tool.path, tool.origin, lines[-1] if lines else "unknown")


@functools.lru_cache(maxsize=None)
def ptxas_gpu_names(path: str) -> frozenset:
    """The real GPU targets (``sm_XY``, ``sm_XYa``...) the ptxas at ``path`` can build: the
    values its ``--help`` allows for ``--gpu-name``. Empty when the help does not say."""
    try:
        text = subprocess.run([path, "--help"], capture_output=True, text=True,
                              timeout=60).stdout
    except OSError as exc:
        raise ToolchainError(f"cannot run {path}: {exc}") from None
    option = text.find("--gpu-name")
    allowed = text.find("Allowed values for this option:", option)
    if option < 0 or allowed < 0:
        return frozenset()
    end = text.find("Default value", allowed)
    return frozenset(re.findall(r"'(sm_\w+)'", text[allowed:end if end > 0 else None]))


def unbuildable_targets(targets) -> list:
    """The targets of ``targets`` the ptxas in use cannot build ([] when its help does not
    list what it can: ptxas itself is then the judge)."""
    try:
        names = ptxas_gpu_names(find_ptxas().path)
    except ToolchainError:
        return []   # no usable ptxas: the compile says so, naming the tool
    return [t for t in targets if names and t not in names]


def ptxas_version() -> tuple[int, ...]:
    """(13, 0, 88) for ptxas 13.0.88; () when the version is not recognized."""
    return tuple(int(p) for p in re.findall(r"\d+", find_ptxas().version)[:3])


_INFO_PATTERNS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "shared": re.compile(r"(\d+) bytes smem"),
}


# "Potential Performance Loss: wgmma.mma_async instructions are serialized due to ..."
# (C7510-C7520): ptxas made each wgmma wait for the previous one, a silent 20% slowdown.
_WGMMA_SERIALIZED = re.compile(r"wgmma\.mma_async instructions are serialized")


def parse_verbose(text: str) -> dict:
    """ptxas ``-v`` output -> ``registers`` (count); ``stack``, ``shared``, ``spills`` in bytes;
    ``wgmma_serialized`` (bool).

    ``spills`` adds spill stores and loads; a field ptxas does not print is 0.
    """
    info = {}
    for key, pattern in _INFO_PATTERNS.items():
        match = pattern.search(text)
        info[key] = int(match.group(1)) if match else 0
    info["spills"] = info.pop("spill_stores") + info.pop("spill_loads")
    info["wgmma_serialized"] = bool(_WGMMA_SERIALIZED.search(text))
    return info


def assemble(ptx: str, arch: str = "sm_90", opt_level: int = 3) -> tuple[bytes, dict]:
    tool = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="aotk-ptxas-") as work:
        source, output = os.path.join(work, "kernel.ptx"), os.path.join(work, "kernel.cubin")
        with open(source, "w") as f:
            f.write(ptx)
        command = [tool.path, f"-arch={arch}", "-v", f"-O{opt_level}", source, "-o", output]
        announce(command)
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip().replace(source, "<ptx>")
            raise ToolchainError(f"ptxas ({tool.path}) rejected the PTX for {arch}:\n{message}")
        with open(output, "rb") as f:
            cubin = f.read()
    return cubin, parse_verbose(result.stdout + result.stderr)


ROOMY_SPILL_BYTES = 1024         # spills from which a build with registers to spare is redone
_REQNTID = re.compile(r"^\.reqntid (\d+)", re.MULTILINE)
_MAXNREG = re.compile(r"^\.maxnreg ", re.MULTILINE)


def assemble_with_register_room(ptx: str, arch: str) -> tuple[str, bytes, dict]:
    """(ptx, cubin, info) of ``assemble``; where ptxas spilled a kilobyte or more while
    using at most half the registers a thread of this CTA (its ``.reqntid``) may have,
    assembled once more with that many stated (``.maxnreg``), and the build that spills
    less kept, with its PTX. Smaller spills stay: ptxas may trade them for occupancy.

    ptxas at -O2 and above sometimes settles on 32 registers and spills kilobytes: fla's
    prepare_wy_repr_bwd (2 warps, sm_80) took 32 registers and 48 KB of spill traffic, and
    255 registers and 3 KB with ``.maxnreg 255`` stated (Triton's own builds of fla's
    recompute_w_u kernels hit the same choice). Not where the PTX states its own
    ``.maxnreg`` (the kernel's ``maxnreg``)."""
    cubin, info = assemble(ptx, arch)
    threads = _REQNTID.search(ptx)
    if info["spills"] < ROOMY_SPILL_BYTES or threads is None or _MAXNREG.search(ptx):
        return ptx, cubin, info
    room = min(MAX_REGISTERS_PER_THREAD, REGISTERS_PER_BLOCK // int(threads.group(1)))
    if info["registers"] * 2 > room:
        return ptx, cubin, info
    stated = ptx[:threads.end()] + f"\n.maxnreg {room}" + ptx[threads.end():]
    stated_cubin, stated_info = assemble(stated, arch)
    if stated_info["spills"] < info["spills"]:
        return stated, stated_cubin, stated_info
    return ptx, cubin, info
