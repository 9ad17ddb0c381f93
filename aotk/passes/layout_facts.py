"""Layout facts: kir + memory vector widths -> the blocked layouts layout assignment starts from.

In: a kir ``Function``, the vector width of each memory op (``layouts.memory_vector_width``)
and the dimension it runs along (``layouts.memory_vector_dim``), and ``num_warps``. Out:
one blocked layout per block rank, one of its own for each block shape the rank's layout
would replicate (``blocked_layouts``), the layouts of the tiles ``async_copy`` moves and of
what computes their addresses (``copy_layouts``), and those of the loads and stores whose
memory is contiguous along another dimension than the last (``access_layouts``), among
them the dot operands stored transposed (``column_read_operands``; and the transposes of
tiles read along their rows, ``transposed_operand_views``). Step 1
of ``passes.assign_layouts``; dumped with the rest of the plan by ``LayoutPlan.listing``.
"""
from __future__ import annotations

from ..ir.kir import ELEMENTWISE_OPS, PURE_OPS, Function, walk
from .layouts import Blocked, Layout, blocked_for


def _elected(tally: dict) -> int:
    """The vector width most of a rank's (or shape's) memory elements can take (the wider
    on a tie). The narrowest width, taken before, let one unaligned store make every
    access of the shape scalar (liger's fused MoE up-projection: three [64, 64] stores,
    one without an alignment hint, all 96 per thread scalar; Triton vectorizes two)."""
    return max(tally, key=lambda width: (tally[width], width))


def blocked_layouts(function: Function, vector_width: dict, num_warps: int) -> tuple:
    """(rank -> Blocked, shape -> Blocked): one blocked layout per rank, shaped by the
    largest block of that rank, and one of its own for each block shape the rank's layout
    would replicate more than a layout shaped by the block itself.

    liger's fused RMS-scaled matmul holds x[32, 256] beside [32, 32] and [256, 32] tiles:
    in the layout shaped by x every thread held the smaller tiles 8 times over, loaded them
    8 times and spilled. As in Triton, whose tensors take a layout from their own shape,
    each such tile now spreads over the threads once. Shapes with a size-1 dimension keep
    the rank's layout: they are there to be broadcast into it."""
    largest: dict = {}
    shapes: set = set()
    rank_widths: dict = {}
    shape_widths: dict = {}
    for op in walk(function.body):
        block_args = [a for region in op.regions for a in region.args]
        for value in list(op.operands) + op.results + block_args:
            shape = value.type.shape
            if not shape:
                continue
            shapes.add(shape)
            if len(shape) not in largest or value.type.numel > _numel(largest[len(shape)]):
                largest[len(shape)] = shape
    for op, width in vector_width.items():
        shape = op.operands[0].type.shape
        if shape:
            elements = op.operands[0].type.numel
            for votes, key in ((rank_widths, len(shape)), (shape_widths, shape)):
                tally = votes.setdefault(key, {})
                tally[width] = tally.get(width, 0) + elements
    rank_widths = {key: _elected(tally) for key, tally in rank_widths.items()}
    shape_widths = {key: _elected(tally) for key, tally in shape_widths.items()}
    by_rank = {rank: blocked_for(shape, rank_widths.get(rank, 1), num_warps)
               for rank, shape in largest.items()}
    by_shape = {}
    for shape in shapes:
        if 1 in shape:
            continue
        own = blocked_for(shape, shape_widths.get(shape, rank_widths.get(len(shape), 1)),
                          num_warps)
        if _replication(own, shape) < _replication(by_rank[len(shape)], shape):
            by_shape[shape] = own
    return by_rank, by_shape


def copy_layouts(function: Function, vector_width: dict, num_warps: int) -> dict:
    """value -> Layout for the tiles async_copy moves and what computes their addresses.

    The rank's blocked layout is shaped by the rank's largest block (a dot's accumulator),
    so a smaller operand tile would wrap in it: threads would hold replicas and carry
    pointers for them across the loop. A layout shaped by the tile itself gives every
    thread its own vectors. It spreads backwards from the copy's pointer and mask through
    ops of the tile's shape, and through loop-carried values (init, block argument, yield)."""
    preferred: dict = {}
    carried_from: dict = {}   # block argument -> (init, yielded)
    for op in walk(function.body):
        if op.opcode == "for":
            region = op.regions[0]
            for arg, init, yielded in zip(region.args[1:], op.operands[3:],
                                          region.terminator.operands):
                carried_from[arg] = (init, yielded)
    for op in walk(function.body):
        if op.opcode != "async_copy":
            continue
        shape = op.operands[0].type.shape
        if not shape:
            continue
        # A tile copied down its columns, or a plain one, runs along its vectors' dim.
        layout = Layout(blocked_for(shape, vector_width[op], num_warps,
                                    fastest=op.attrs.get("vector_dim")))
        pending = list(op.operands[:2 if op.attrs["has_mask"] else 1])
        while pending:
            value = pending.pop()
            if value in preferred or value.type.shape != shape:
                continue
            preferred[value] = layout
            if value in carried_from:
                pending.extend(carried_from[value])
            elif value.owner is not None and value.owner.opcode in PURE_OPS and \
                    not value.owner.regions:
                pending.extend(value.owner.operands)
    return preferred


def _replication(blocked: Blocked, shape: tuple) -> int:
    """How many threads hold each element of ``shape`` laid out in ``blocked``."""
    copies = 1
    for dim, size in enumerate(shape):
        copies *= max(1, blocked.tile(dim) // size)
    return copies


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n



def access_layouts(function: Function, vector_dim: dict, vector_width: dict,
                   num_warps: int, transposed: frozenset = frozenset()) -> dict:
    """memory op -> Layout for the loads and stores that access memory in vectors along a
    dimension other than the last (``layouts.memory_vector_dim``): a blocked layout of the
    op's shape, fastest along that dimension, so that each thread reads whole vectors and a
    warp's lanes cover consecutive ones. Triton gives each memory op a layout ordered by
    its contiguity (its Coalesce pass) and converts where the value is used in another;
    aotk does so for these ops: a column-major tile was one scalar load per element, the
    32 lanes of a warp a row apart (``tests/test_load_layouts.py``).

    Not for a load a dot takes as an operand (directly or through elementwise ops), unless
    the dot stores that operand transposed (``column_read_operands``; ``transposed``): the
    dot stores its other operands into shared memory row by row, and from a layout down the
    columns that is one scalar store an element, with its own address. Tried on fla's
    chunked kernels (num_warps 2, [64, 64] tiles of k read transposed into dots): the
    vector loads, then those stores, took fla's chunk_gated_delta_rule kernels from no
    spill to 0.4-5 KB of spills, against none for Triton, which stores such a tile into
    shared memory transposed, as such an operand now is."""
    operands = _dot_operand_loads(function) - set(transposed)
    access = {}
    for op, dim in vector_dim.items():
        shape = op.operands[0].type.shape
        if dim != len(shape) - 1 and vector_width[op] > 1 and op not in operands:
            access[op] = Layout(blocked_for(shape, vector_width[op], num_warps, fastest=dim))
    return access


def transposed_operand_views(function: Function, vector_dim: dict, vector_width: dict) -> dict:
    """(dot, operand index) -> the ``permute`` op of the dot operands that are the transpose
    of a 2-d value read from memory in vectors along its rows (``tl.dot(a, tl.trans(k))``:
    fla's k @ k^T, attention's q @ k^T; for A, 16-bit elements only, as for
    ``column_read_operands``). Such a B is, in the transposed view of its value's layout,
    read down its columns: the dot stores it K-major from there (the value's rows as they
    are), and the permute moves no element (``layout_demands._permute``), where it went
    through shared memory once to transpose and once more to be stored."""
    found = {}
    for op in walk(function.body):
        if op.opcode != "dot" or len(op.result.type.shape) != 2:
            continue
        for index, operand in enumerate(op.operands[:2]):
            view = operand.owner
            if view is None or view.opcode != "permute" or tuple(view.attrs["order"]) != (1, 0):
                continue
            if index == 0 and operand.element.itemsize != 2:
                continue
            loads = _loads_of(view.operands[0])
            if loads and all(vector_dim.get(load) == 1 and vector_width.get(load, 1) > 1
                             for load in loads):
                found[op, index] = view
    # Only transposes that nothing else takes: another user would want the transpose in its
    # own layout, through shared memory, and the dot would convert from there again.
    uses: dict = {}
    for op in walk(function.body):
        for index, value in enumerate(op.operands):
            uses.setdefault(value, []).append((op, index))
    return {key: view for key, view in found.items()
            if all(use in found for use in uses[view.result])}


def _dot_operand_loads(function: Function) -> set:
    """The loads whose values reach a dot's a or b through elementwise ops and transposes."""
    loads = set()
    for op in walk(function.body):
        if op.opcode != "dot":
            continue
        pending = list(op.operands[:2])
        while pending:
            owner = pending.pop().owner
            if owner is None:
                continue
            if owner.opcode == "load":
                loads.add(owner)
            elif owner.opcode in ELEMENTWISE_OPS or owner.opcode == "permute":
                pending.extend(owner.operands)
    return loads


def _loads_of(value) -> list:
    """The loads among what ``value`` is computed from through elementwise ops of its shape
    (values of another shape, and any other op, end the walk there)."""
    loads, pending, seen = [], [value], set()
    while pending:
        current = pending.pop()
        owner = current.owner
        if owner is None or current in seen or current.type.shape != value.type.shape:
            continue
        seen.add(current)
        if owner.opcode == "load":
            loads.append(owner)
        elif owner.opcode in ELEMENTWISE_OPS:
            pending.extend(owner.operands)
    return loads


def column_read_operands(function: Function, vector_dim: dict, vector_width: dict) -> dict:
    """(dot, operand index) -> [loads]: the dot operands computed, through elementwise ops
    only, from loads that read memory in vectors down their columns: a B ([K, N]) read
    along K (fla's ``k`` through a block pointer of order (0, 1)), or a 16-bit A ([M, K])
    read along M (fla's chunk_delta_h reads k that way as the A of k^T @ v). A tensor-core
    dot stores such an operand into its transposed tile, B K-major ([N, K]) and A M-major
    ([K, M]), a thread's run down the column in one vector (``backend.mma.store_tile`` by
    columns), which wgmma reads through its descriptors (A with imm-trans-a) and mma.sync
    through ldmatrix (A with .trans, hence 16-bit only); the loads then read in their own
    layout (``access_layouts``). An operand that also depends on any other load of its
    shape keeps the row layout."""
    found = {}
    for op in walk(function.body):
        if op.opcode != "dot" or len(op.result.type.shape) != 2:
            continue
        for index, operand in enumerate(op.operands[:2]):
            if index == 0 and operand.element.itemsize != 2:
                continue
            loads = _loads_of(operand)
            if loads and all(vector_dim.get(load) == 0 and vector_width.get(load, 1) > 1
                             for load in loads):
                found[op, index] = loads
    return found
