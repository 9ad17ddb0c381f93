"""``kir.clone_function``: the copy the passes rewrite while the frontend's memoized kir
stays as it is (``compiler._lower``)."""
import aotk
import aotk.language as tl
from aotk.ir.kir import clone_function, print_function, walk
from aotk.ir.signature import Signature


@aotk.jit
def _looped_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(n):
        acc += tl.load(x_ptr + i * BLOCK + offs)
    if n > 2:
        acc = acc * 2.0
    tl.store(out_ptr + offs, acc)


def _generated():
    signature = Signature.parse("*fp32:16, *fp32:16, i32", _looped_kernel.runtime_names)
    return _looped_kernel.kir(signature, constants={"BLOCK": 128})


def test_a_clone_lists_the_same_and_shares_no_op_value_or_attribute_container():
    original = _generated()
    clone = clone_function(original)
    assert print_function(clone) == print_function(original)
    ops, copies = list(walk(original.body)), list(walk(clone.body))
    assert len(ops) == len(copies) and all(a is not b for a, b in zip(ops, copies))
    originals = {id(v) for op in ops for v in op.operands + op.results}
    originals |= {id(p.value) for p in original.params}
    for op in copies:
        # Every operand is a value of the clone: defined by a cloned op, a region argument
        # or a parameter of the clone, never one of the original's.
        assert not any(id(v) in originals for v in op.operands + op.results)
        assert all(result.owner is op for result in op.results)
        for region in op.regions:
            assert not any(id(arg) in originals for arg in region.args)


def test_rewriting_the_clone_leaves_the_original_as_it_was():
    original = _generated()
    before = print_function(original)
    clone = clone_function(original)
    for op in walk(clone.body):
        op.attrs["rewritten"] = True
        for value in op.attrs.values():
            if isinstance(value, list):
                value.append(0)
    loop = next(op for op in walk(clone.body) if op.opcode == "for")
    loop.regions[0].body.insert(0, loop.regions[0].body[-1])
    clone.body.pop(0)
    assert print_function(original) == before
