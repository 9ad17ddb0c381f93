"""Where NVIDIA's binaries come from, in order:

1. ``AOTK_PTXAS`` / ``AOTK_FATBINARY`` (an explicit path wins, and must exist);
2. the ``nvidia-cuda-nvcc`` pip wheel (``site-packages/nvidia/cu13/bin``), a project dependency;
3. ``PATH``;
4. ``/usr/local/cuda/bin``.
The origin is reported (``aotk doctor``) so the choice is never a surprise.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import shlex
import shutil
import sys
from dataclasses import dataclass

from .errors import ToolchainError


@dataclass(frozen=True)
class Tool:
    path: str
    origin: str


def wheel_directories() -> list[str]:
    """``nvidia/cu13`` (and older ``cu12``) folders of installed NVIDIA wheels."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for root in spec.submodule_search_locations:
        for flavour in ("cu13", "cu12", "cuda_nvcc"):
            candidate = os.path.join(root, flavour)
            if os.path.isdir(candidate):
                found.append(candidate)
    return found


_show_commands = False


def show_commands(on: bool):
    """Whether each tool this process runs (ptxas, fatbinary) is printed first, as
    ``aotk build -v`` asks: the build turns it on in its compile workers too."""
    global _show_commands
    _show_commands = bool(on)


def announce(command: list, cwd: str | None = None):
    """Prints ``command`` (on stdout, flushed: workers share the build's stdout) when
    ``show_commands`` is on."""
    if _show_commands:
        where = f" (in {cwd})" if cwd else ""
        # One write of the whole line: print() writes the text and the newline apart, and
        # the lines of two workers then interleave.
        sys.stdout.write("aotk: " + " ".join(shlex.quote(str(part)) for part in command)
                         + where + "\n")
        sys.stdout.flush()


@functools.lru_cache(maxsize=None)
def find_tool(name: str) -> Tool:
    variable = f"AOTK_{name.upper()}"
    explicit = os.environ.get(variable)
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise ToolchainError(f"{variable}={explicit} is not an executable file")
        return Tool(explicit, variable)
    for directory in wheel_directories():
        candidate = os.path.join(directory, "bin", name)
        if os.access(candidate, os.X_OK):
            return Tool(candidate, "nvidia-cuda-nvcc wheel")
    on_path = shutil.which(name)
    if on_path:
        return Tool(on_path, "PATH")
    candidate = os.path.join("/usr/local/cuda/bin", name)
    if os.access(candidate, os.X_OK):
        return Tool(candidate, "/usr/local/cuda")
    raise ToolchainError(f"{name} not found: `pip install nvidia-cuda-nvcc`, put a CUDA "
                         f"toolkit on PATH, or set {variable}=/path/to/{name}")
