"""What each compile target's instruction set has, by compute capability.

In: a target name, ``sm_XY`` (``sm_90a`` for the arch-specific variant). Out: the yes/no
answers the passes and the backend ask before they choose an instruction, and the shared
memory a block may use. Every choice of
an instruction by target goes through here, so a new target means reading these rows,
not grepping for version numbers.

Turing (sm_75) is the oldest target: it has ``ldmatrix`` and ``mma.sync`` for fp16 in the
m16n8k8 shape only; no ``cp.async``, no bf16 conversions or tensor-core shapes, no tf32 or
int8 m16n8 shapes. LLVM's NVPTX backend already lowers bf16 arithmetic and conversions for
it with integer rounding (Triton's emulation for sm < 80); only the inline PTX that aotk
writes itself must ask here.
"""
from __future__ import annotations


# The most shared memory one block may use on each target (cudaDevAttrMaxSharedMemoryPerBlockOptin):
# Turing (T4, RTX 20) 64 KB, A100 163 KB, the consumer GPUs (RTX 30/40/50, sm_86/89/120) 99 KB,
# H100/H200 and B200 227 KB.
SHARED_BYTES_PER_BLOCK = {"sm_75": 65536, "sm_80": 166912, "sm_86": 101376, "sm_89": 101376,
                          "sm_90": 232448, "sm_100": 232448, "sm_120": 101376}


# Registers, the same on every target from sm_75 on: 64K 32-bit registers an SM (the most
# one block may use) and at most 255 a thread (``.maxnreg``, ``maxnreg``).
REGISTERS_PER_BLOCK = 65536
MAX_REGISTERS_PER_THREAD = 255


def capability(target: str) -> int:
    """The compute capability as an int: 75 for sm_75, 90 for sm_90a."""
    return int(target[3:].rstrip("a"))


def has_async_copy(target: str) -> bool:
    """``cp.async`` (the software pipeline's copies into shared memory): sm_80 on."""
    return capability(target) >= 80


def has_wgmma(target: str) -> bool:
    """``wgmma`` exists on sm_90 only, as the arch-specific target sm_90a (not on later
    GPUs)."""
    return target.rstrip("a") == "sm_90"


def has_l2_cache_hint(target: str) -> bool:
    """``createpolicy`` and the ``.L2::cache_hint`` operand of ``ld``/``st`` (sm_80 on):
    an eviction policy reaches L2 as well as L1, as Triton lowers it on these targets."""
    return capability(target) >= 80


def has_ampere_mma(target: str) -> bool:
    """Ampere's ``mma.sync`` shapes: m16n8k16 for fp16 and bf16, m16n8k8 for tf32,
    m16n8k32 for int8 (sm_80 on). Turing has fp16 m16n8k8 only: ``backend.mma`` issues two
    of those per 16-deep slice, and every other dtype's dot runs on CUDA cores."""
    return capability(target) >= 80


def has_bf16_convert(target: str) -> bool:
    """``cvt.{rn,rz}.bf16.f32`` (sm_80 on)."""
    return capability(target) >= 80


def has_bf16_atom_add(target: str) -> bool:
    """``atom.add.noftz.bf16`` (sm_90 on); f16 atomics exist from sm_70."""
    return capability(target) >= 90


def has_vector_atom_add(target: str) -> bool:
    """``atom.add.v2/.v4.f32`` and ``atom.add.noftz.v2/.v4/.v8.{f16,bf16}`` (sm_90 on, PTX ISA
    8.1)."""
    return capability(target) >= 90


def has_grid_dependency_control(target: str) -> bool:
    """``griddepcontrol`` (``tl.extra.cuda.gdc_wait`` / ``gdc_launch_dependents``): sm_90
    on, as programmatic dependent launch itself."""
    return capability(target) >= 90
