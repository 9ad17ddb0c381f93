"""A built library's kernels as PyTorch operators: ``aotk.torch.register(aotk.load(path))``.

In: a ``Library`` (``aotk.load``). Out: each kernel registered with ``torch.library.custom_op``
as ``torch.ops.<library name>.<kernel>``, and the namespace object returned. The operator's
schema follows the kernel's parameters (a pointer is a ``Tensor``, an integer an ``int``, a
float a ``float``); it returns nothing and declares every pointer argument as mutated (a
kernel may write through any of them), so that functionalization keeps the order of reads
and writes. Its fake (meta) implementation does nothing: outputs are caller-allocated, so
``torch.compile(fullgraph=True)`` traces through a call without running it. A call runs on
the device of its first tensor, on torch's current stream there, through the ``Library``'s
kernel itself: its dtype, device and declared-layout checks (``aotk.load``) hold for the
operator too. Kernels with host tensor descriptors (``tensordesc<...>`` parameters) are not
registered: a TensorDescriptor is not a type an operator schema can hold.
"""
from __future__ import annotations

import keyword

_registered: dict = {}   # namespace -> (library path, ops namespace)

_SCALARS = {"i1": "bool", "fp16": "float", "bf16": "float", "fp32": "float", "fp64": "float"}


def register(library, namespace: str | None = None):
    """Registers every kernel of ``library`` as ``torch.ops.<namespace>.<kernel>`` (the
    namespace defaults to the library's name) and returns ``torch.ops.<namespace>``. Loading
    the same library again returns the same operators; another library under a namespace
    already taken is a ValueError."""
    import torch
    namespace = namespace or library.name
    known = _registered.get(namespace)
    if known is not None:
        if known[0] != library.path:
            raise ValueError(f"torch.ops.{namespace} already holds the kernels of {known[0]}; "
                             f"register {library.path} under another namespace=")
        return known[1]
    for name in library.kernels:
        kernel = getattr(library, name)
        if kernel.description.get("descriptors"):
            continue
        _register_kernel(torch, namespace, name, kernel)
    ops = getattr(torch.ops, namespace)
    _registered[namespace] = (library.path, ops)
    return ops


def _annotation(parameter_type: str) -> str:
    if parameter_type.startswith("*"):
        return "torch.Tensor"
    return _SCALARS.get(parameter_type, "int")


def _register_kernel(torch, namespace: str, name: str, kernel) -> None:
    params = [(p["name"], p["type"]) for p in kernel.description["params"]]
    # Python names for the parameters (a kernel parameter may be a Python keyword).
    arguments = [f"{n}_" if keyword.iskeyword(n) else n for n, _ in params]
    tensors = [a for a, (_, t) in zip(arguments, params) if t.startswith("*")]
    signature = ", ".join(f"{a}: {_annotation(t)}" for a, (_, t) in zip(arguments, params))
    first = tensors[0] if tensors else None
    body = (f"    with torch.cuda.device({first}.device):\n"
            f"        kernel({', '.join(arguments)}, stream=torch.cuda.current_stream().cuda_stream)\n"
            if first else f"    kernel({', '.join(arguments)})\n")
    source = f"def {name}({signature}) -> None:\n{body}"
    scope = {"torch": torch, "kernel": kernel}
    exec(compile(source, f"<aotk operator {namespace}::{name}>", "exec"), scope)
    operator = torch.library.custom_op(f"{namespace}::{name}", mutates_args=tuple(tensors),
                                       device_types="cuda")(scope[name])
    operator.register_fake(lambda *args, **kwargs: None)
