"""kir: typed SSA of block operations, the frontend's output.

A ``Function`` holds its parameters and a list of ``Op``s. Structured control flow ops
(``for``, ``if``, ``while``) own ``Region``s: a list of block arguments and a body of ops that
ends in a terminator (``yield`` / ``condition``); they may have several ``results``. Every
value carries a ``BlockType`` (element type + static shape, no layout). Typing is done
before an op is created (``aotk.semantic``): passes, the interpreter and the GPU backend read
types, they never infer them.

The op set, with operands and attributes:

  program_id / num_programs   ()                      axis            -> i32 scalar
  constant                    ()                      value           -> scalar or block (splat)
  arange                      ()                      start, end      -> i32[end-start]
  splat                       (scalar)                opaque          -> block of result shape
                              (opaque: LLVM may not look through the scalar; see
                              backend.views)
  broadcast                   (x)                     (1-dims grow)   -> block of result shape
  expand_dims                 (x)                     axis            -> x's shape with a 1 inserted
  <binary>                    (a, b)  same shape and element type     -> same type
      add sub mul fdiv idiv irem frem and or xor shl shr min max
      idiv/irem round toward zero (C); shr is arithmetic for signed, logical for unsigned;
      frem is C fmod; min/max on floats return the non-NaN operand if one is NaN, or NaN
      with the attribute propagate_nan
  cmp                         (a, b)                  predicate       -> int1 of same shape
      predicate in eq ne lt le gt ge; signedness from the operand type
  addptr                      (ptr, offset)  offset is an integer     -> ptr; moves by offset elements
  <unary>                     (x)                                     -> same type
      neg not(bitwise) abs exp exp2 log log2 sqrt rsqrt sin cos floor ceil
  fma                         (a, b, c)                               -> a*b+c, one rounding
  math                        (*operands) one shape   function        -> the math function
      named (erf, add_rz, ...: aotk.semantic's ALL_MATH_FUNCTIONS, whose row gives the
      operand and result types) on each element; the GPU calls libdevice
  select                      (cond:int1, a, b)                       -> a where cond else b
  cast                        (x)                     bitcast: bool   -> result type
  load                        (ptr, [mask], [other])  cache, eviction, volatile, has_mask, has_other
  store                       (ptr, value, [mask])    cache, eviction, has_mask   -> no result
  descriptor_load             (base, shape_0..shape_{R-1}, stride_0..stride_{R-1},
                               offset_0..offset_{R-1})  rank=R, block_shape=(B_0, ..)
                              -> block[B_0, ..] of base's element type: element i is
                              base[sum_d (offset_d + i_d) * stride_d] where every
                              0 <= offset_d + i_d < shape_d, else 0
  descriptor_store            (base, shapes.., strides.., offsets.., value)  same attrs
                              -> no result; elements outside the shape are not written
      base is a scalar pointer; shapes, strides and offsets are integer scalars (i32 or
      i64); the last stride is the constant 1 (``tl.make_tensor_descriptor``).
      ``passes.descriptors`` rewrites them into load/store; the GPU may copy them with TMA
  hint                        (x)                     multiple_of | max_contiguous | max_constancy
                                                      (each a tuple per dim or None) -> x unchanged
  reduce                      (x)                     axis, combine   -> x's shape without axis
      combine in add max min xor; max/min on floats ignore NaN like minimum/maximum;
      combine=custom: operands (x1..xN) of one shape, region combine(acc1..accN, new1..newN)
      of 0-d values ending in yield of N values of the operands' types -> N results
      (the combine is assumed associative and commutative: the order is unspecified)
  argreduce                   (x)                     axis, combine   -> i32 index along axis
      combine in max min; ties go to the smallest index
  dot                         (a, b, acc)             precision       -> acc + a @ b  ([B,]M,N)
      a [.., M, K], b [.., K, N]; precision tf32 / tf32x3 / ieee for fp32 inputs, else None
  scan                        (x)                     axis, combine, reverse -> inclusive scan
      combine in add mul; reverse scans from the end of the axis (the scan of the reversed
      axis, reversed back); combine=custom: N operands and a region as for reduce -> N
      results, out[i] = combine(out[i-1], x[i]) (the combine is assumed associative only)
  permute                     (x)                     order           -> x's dims taken in order
  reshape                     (x)                                     -> same elements, row-major
  join                        (a, b)  same type       -> shape + (2,): a at [..., 0], b at [..., 1]
  split                       (x)  last dim 2         index           -> x[..., index]
  sort                        (x)                     descending      -> x sorted along its
                              last axis by a bitonic network: stage by stage, the pair
                              (i, i + d) swaps where (x[i] > x[i + d]) != (descending if
                              the run is the whole axis, else whether i's run of 2d is odd)
  gather                      (src, index:int)        axis            -> src's elements named
                              by index along axis (index's shape, equal to src's off the
                              axis); an index outside src is clamped into it
  histogram                   (x:int 1-d, [mask])     has_mask        -> i32[num_bins]: how
                              many elements equal each of 0..num_bins-1 (others not counted)

Side effects (never removed or reordered; layout roots like stores, see ``SIDE_EFFECT_OPS``):

  atomic_rmw                  (ptr, val, [mask])      kind, sem, scope, has_mask -> old values
      kind in add max min and or xor xchg; max/min on integer elements only (signedness from
      the element type: aotk.semantic builds float max/min from them); masked-off lanes
      return 0; duplicate addresses within one block apply one after another, row-major
  atomic_cas                  (ptr, cmp, val)         sem, scope      -> old values; val is
                              stored where the old bits equal cmp's
      sem in relaxed acquire release acq_rel; scope in cta gpu sys
  debug_barrier               ()                                      -> no result
  device_print                (*args)                 prefix, hex     -> no result; one line
                              per element: "pid (x, y, z) idx (i, j)<prefix><value>"
  device_assert               (cond:int1)             message, function -> no result; fails
                              when any element is false (present only in debug builds)
  read_register               ()                      register        -> scalar read afresh
                              each time: globaltimer (i64 ns), smid (i32)
  inline_asm                  (*args) one shape       asm, outputs, inputs, clobbers (the
                              constraint codes), pure, pack -> one
                              result per dtype, of the args' shape; the assembly runs once
                              per pack elements (never removed or merged, even when pure)

A hint (made by ``passes.next_trip_prefetch``; nothing to the interpreter):

  prefetch                    (ptr, mask:int1)                        -> no result; the
                              lines the unmasked elements of ptr point at are fetched
                              into L1 (``prefetch.global.L1``); no fault, nothing written

Software pipelining (made by ``passes.pipeline`` for the GPU only; never interpreted):

  async_copy                  (ptr, [mask], stage:i32) buffer, stages, has_mask, first,
                              [tile_dims], [vector_dim], [order] -> no result; copies the
                              block ptr points at into slot stage of the shared buffer
                              (masked-off elements become 0); a block with size-1 dims
                              fills the slot of its tile_dims (the tile's rows, columns:
                              reversed, the slot holds its transpose); vector_dim: the dim
                              its vectors run along (default the last); order: the dims
                              of a plain tile, fastest first
  load [staged]               (ptr, [mask], stage:i32) staged (a buffer), stages, order
                              -> what async_copy put in slot stage of that plain tile from
                              these addresses, read where the load was (ptr and mask are
                              not read: they carry the layout facts)

  async_commit                ()                      -> closes the group of copies issued
  async_wait                  ()                      pending -> waits until at most pending
                              groups are in flight, then a CTA barrier
  shared_read                 (stage:i32)             buffer, stages, [transposed] -> the
                              block in slot stage of buffer, or its transpose (only a dot
                              that mma computes reads one)
  wgmma_wait                  (*values)               pending -> the values, one result
                              each, once at most pending of the thread's wgmma groups are
                              in flight: the accumulators of dots with wgmma_deferred (which
                              leave their group running) that the groups it retires write

  With TMA (operands read through tensor descriptors, on wgmma): per stage, one mbarrier per
  group of tiles (``groups``: the tiles the first dot reading each reads, in body order).
  tma_init                    ()                      loop, stages, groups -> the mbarriers
                              initialized (count 1), then a CTA barrier
  tma_expect                  (stage, in_range:int1)  loop, stages, group, bytes -> one thread
                              arms the group's mbarrier of the stage to expect bytes
                              (nothing if !in_range)
  tma_copy                    (offsets..., stage, in_range) loop, buffer, stages, group,
                              tensor_map, box -> one thread copies the [rows, columns] block
                              at the offsets (one per dimension of the map, outermost
                              first; rows and columns the last two) into slot stage,
                              one box per 128-byte panel (zeros outside the tensor),
                              completing bytes on the group's mbarrier
  tma_wait                    (stage, phase:i32)      loop, stages, group -> every thread
                              waits for phase parity ``phase`` of the group's mbarrier of
                              the stage
  tma_release                 ()                      loop, stages, groups -> CTA barrier; the
                              mbarriers are invalidated (their bytes may be reused)

  A producer warp (``passes.warp_specialize``; tma_init and tma_release take ``consumers``:
  one more mbarrier per stage, that many arrivals, the compute warps done with the stage;
  a producer's tma_expect and tma_copy take ``elected``, the thread that issues them):
  producer_warp               ()                      num_warps -> int1: warp num_warps
  warp_exit                   ()                      -> the thread exits
  consumers_only              ()                      num_warps -> CTA barriers from here on
                              are the num_warps compute warps' alone
  tma_produce_wait            (stage, phase, refill:int1) loop, stages, groups, num_warps ->
                              with refill, the producer waits until the compute warps are
                              done with the stage (phase: the trip's tile phase)
  tma_consumed                (stage, later:int1)     loop, stages, groups -> with later,
                              each warp arrives: done with the previous trip's stage

  TMA multicast between the producers of a cluster pair (``passes.multicast``, num_ctas=2;
  programs 2i and 2i + 1 run as a cluster of two where the grid's x is even, alone
  otherwise, then sharing nothing; tma_init / tma_release take ``pair``: one more
  mbarrier per stage, count 1, the other producer's word, and the words compared):
  cluster_pair                (scalars...)            loop, stages, groups, members -> i32:
                              bit l set where the scalars members[l] (load l's) are equal
                              in both CTAs; the same word in both
  tma_copy [pair_bit]         (offsets..., stage, in_range, pair) -> with bit pair_bit of
                              pair set, this CTA copies half the panels (by its rank) into
                              the slot of both CTAs
  tma_produce_wait [pair]     (stage, phase, refill, pair) -> with pair nonzero, after its
                              own compute warps the producer signals the other producer and
                              waits for its signal

Structured control flow (regions; every carried value keeps one type throughout):

  for                         (lb, ub, step, *init)   region body(iv, *carried) ends in yield
                              -> results: the carried values after the last iteration.
                              Iterates iv = lb, lb+step, ... while iv < ub (step > 0) or
                              iv > ub (step < 0); lb/ub/step are integer scalars of one type.
  if                          (cond:int1 scalar)      regions then, else; each ends in yield
                              -> results: the yielded values of the branch taken
  while                       (*init)                 regions before(*carried) ending in
                              condition(cond, *carried) and after(*carried) ending in yield
                              -> results: the carried values when cond became false
  map_elementwise             (*args) one shape       pack            region body(pack scalars
                              of each arg, arg by arg) ends in yield(pack scalars of each
                              result, result by result) -> one result per yielded group, of
                              the args' shape: the region run on each run of pack elements
  yield / condition           terminators, no result
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from .types import BlockType

BINARY_OPS = frozenset("add sub mul fdiv idiv irem frem and or xor shl shr min max".split())
UNARY_OPS = frozenset("neg not abs exp exp2 log log2 sqrt rsqrt sin cos floor ceil".split())
COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
# Ops computing each element from the same element of their operands, which have one shape.
ELEMENTWISE_OPS = BINARY_OPS | UNARY_OPS | frozenset(("cmp", "select", "cast", "fma", "math"))
# Ops whose result depends only on their operands: safe to recompute or remove when unused.
PURE_OPS = ELEMENTWISE_OPS | frozenset(
    "program_id num_programs constant arange splat broadcast expand_dims addptr hint permute "
    "reshape join split scan sort gather histogram".split())
REDUCTIONS = frozenset(("reduce", "argreduce"))
# Ops that combine the elements along an axis (named combine, or a combine region).
COMBINING = REDUCTIONS | frozenset(("scan",))
# Ops that move elements between positions: the result is built in its own layout.
SHUFFLES = frozenset(("permute", "reshape", "join", "split"))
CONTROL_FLOW = frozenset(("for", "if", "while"))
ATOMICS = frozenset(("atomic_rmw", "atomic_cas"))
# Ops kept for their effect on memory or output, whether or not their result is used.
ASYNC_OPS = frozenset(("async_copy", "async_commit", "async_wait", "tma_init", "tma_expect",
                       "tma_copy", "tma_wait", "tma_release", "wgmma_wait", "producer_warp",
                       "warp_exit", "consumers_only", "tma_produce_wait", "tma_consumed",
                       "cluster_pair"))
SIDE_EFFECT_OPS = ATOMICS | ASYNC_OPS | frozenset(("debug_barrier", "device_print",
                                                   "device_assert", "read_register",
                                                   "inline_asm", "prefetch"))
TERMINATORS = frozenset(("yield", "condition"))
# Tensor-descriptor memory ops: a tile addressed by (base, shape, strides, offsets).
DESCRIPTOR_OPS = frozenset(("descriptor_load", "descriptor_store"))


class Value:
    __slots__ = ("type", "owner", "hint_name")

    def __init__(self, type: BlockType, owner: "Op | None" = None, hint_name: str | None = None):
        self.type = type
        self.owner = owner
        self.hint_name = hint_name   # the Python variable it was bound to, for readable dumps

    @property
    def shape(self) -> tuple:
        return self.type.shape

    @property
    def element(self):
        return self.type.element

    def __repr__(self) -> str:
        return f"Value({self.type})"


@dataclass(eq=False)
class Region:
    args: list                                   # block arguments (Values)
    body: list = field(default_factory=list)     # ops; the last one is the terminator

    @property
    def terminator(self) -> "Op":
        return self.body[-1]


@dataclass(eq=False)
class Op:
    opcode: str
    operands: list
    result: Value | None
    attrs: dict = field(default_factory=dict)
    loc: tuple | None = None   # (filename, line, column) of the source construct
    regions: list = field(default_factory=list)
    results: list = field(default_factory=list)   # every result; [result] for one-result ops

    def __post_init__(self):
        if self.result is not None and not self.results:
            self.results = [self.result]


def walk(ops):
    """Every op of ``ops`` and of their regions, each before the ops nested in it."""
    for op in ops:
        yield op
        for region in op.regions:
            yield from walk(region.body)


def descriptor_operands(op: Op) -> tuple:
    """(base, shapes, strides, offsets, value) of a descriptor op; value is None for a load."""
    rank = op.attrs["rank"]
    operands = op.operands
    value = operands[1 + 3 * rank] if op.opcode == "descriptor_store" else None
    return (operands[0], operands[1:1 + rank], operands[1 + rank:1 + 2 * rank],
            operands[1 + 2 * rank:1 + 3 * rank], value)


@dataclass(eq=False)
class Param:
    name: str
    value: Value
    # Specialization hint from the signature: 16 = pointer 16-byte aligned / integer divisible
    # by 16, 1 = integer equal to 1 (the frontend folds it to a constant), None = no promise.
    hint: int | None = None


@dataclass(eq=False)
class Function:
    name: str
    params: list                       # list[Param], runtime parameters in order
    body: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)   # constexpr name -> Python value
    filename: str = "<unknown>"
    debug: bool = False   # device_assert / runtime `assert` are compiled in only when set
    # TMA tensor maps the kernel takes after its params (passes.tensor_maps recipes).
    tensor_maps: list = field(default_factory=list)

    def __str__(self) -> str:
        return print_function(self)


def clone_function(function: Function) -> Function:
    """A copy of ``function`` that passes may rewrite while the original stays as it is
    (the frontend memoizes its kir per signature): new values, ops and regions, operands
    renamed to the copies; attribute values copied one level down (a list or dict of them
    is the pass's own), types and constants shared (immutable). Eight times faster than
    ``copy.deepcopy`` (the tutorial matmul's kir: 0.6 ms against 4.4 ms a compile)."""
    mapping: dict = {}

    def value(original: Value) -> Value:
        copied = mapping.get(original)
        if copied is None:
            copied = mapping[original] = Value(original.type, None, original.hint_name)
        return copied

    def attr(item):
        if isinstance(item, Value):
            return value(item)
        if isinstance(item, list):
            return [attr(element) for element in item]
        if isinstance(item, dict):
            return {key: attr(element) for key, element in item.items()}
        if isinstance(item, set):
            return {attr(element) for element in item}
        return item

    def ops(originals: list) -> list:
        copies = []
        for op in originals:
            results = [value(result) for result in op.results]
            copied = Op(op.opcode, [value(operand) for operand in op.operands],
                        value(op.result) if op.result is not None else None,
                        {key: attr(item) for key, item in op.attrs.items()}, op.loc,
                        [Region([value(arg) for arg in region.args], ops(region.body))
                         for region in op.regions], results)
            for result in results:
                result.owner = copied
            copies.append(copied)
        return copies

    params = [Param(param.name, value(param.value), param.hint) for param in function.params]
    return Function(function.name, params, ops(function.body), dict(function.constants),
                    function.filename, function.debug, list(function.tensor_maps))


class Builder:
    """Appends ops at the insertion point (a list of ops: the function body or a region's).

    ``loc`` is set by the frontend before each statement."""

    def __init__(self, function: Function):
        self.function = function
        self.block = function.body
        self.loc = None

    @contextlib.contextmanager
    def insertion(self, block: list):
        previous, self.block = self.block, block
        try:
            yield block
        finally:
            self.block = previous

    def create(self, opcode: str, operands, result_type: BlockType | None, **attrs) -> Value | None:
        result = Value(result_type) if result_type is not None else None
        op = Op(opcode, list(operands), result, attrs, self.loc)
        if result is not None:
            result.owner = op
        self.block.append(op)
        return result

    def create_region_op(self, opcode: str, operands, regions, result_types, **attrs) -> Op:
        """An op owning ``regions`` (already filled) with one result per type."""
        results = [Value(t) for t in result_types]
        op = Op(opcode, list(operands), None, attrs, self.loc, list(regions), results)
        for value in results:
            value.owner = op
        self.block.append(op)
        return op


def _format_attr(value) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ",".join(_format_attr(v) for v in value) + ")"
    if isinstance(value, str) and any(ch in value for ch in '\n",'):
        return repr(value)   # inline assembly: the op stays on one line of the listing
    return str(value)


def cache_listing(function: Function) -> str:
    """The listing compile caches key on: everything that fixes the generated code. Source
    lines reach the code only through a device_assert's message (file and line), so
    elsewhere they are left out, and the same kernel written in two places (a Triton-C
    kernel and its Python twin) shares one entry."""
    if any(op.opcode == "device_assert" for op in walk(function.body)):
        return f"// file {function.filename}\n" + print_function(function)
    return print_function(function, locations=False)


def print_function(function: Function, value_note=None, op_note=None,
                   locations: bool = True) -> str:
    """The kir listing: one op per line, values numbered in definition order, each op's
    source line noted (unless ``locations`` is off).

    ``value_note(value)`` and ``op_note(op)`` (optional) return text printed after a
    value's type and after an op's attributes: the gir listing shows layouts this way."""
    names: dict[int, str] = {}

    def name_of(v: Value) -> str:
        if id(v) not in names:
            names[id(v)] = f"%{len(names)}"
        return names[id(v)]

    def typed(v: Value) -> str:
        note = value_note(v) if value_note else ""
        return f"{v.type}{' ' + note if note else ''}"

    params = ", ".join(f"{name_of(p.value)}: {typed(p.value)}" for p in function.params)
    pnames = ", ".join(f"{p.name}={name_of(p.value)}" + (f":{p.hint}" if p.hint else "")
                       for p in function.params)
    lines = [f"kir.func @{function.name}({params}) {{"]
    if pnames:
        lines.append(f"  // params: {pnames}")
    if function.constants:
        consts = ", ".join(f"{k}={v!r}" for k, v in function.constants.items())
        lines.append(f"  // constexprs: {consts}")
    _print_ops(function.body, name_of, typed, op_note, lines, "  ", locations)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _print_ops(ops, name_of, typed, op_note, lines, indent, locations=True):
    for op in ops:
        args = ", ".join(name_of(v) for v in op.operands)
        attrs = " ".join(f"{k}={_format_attr(v)}" for k, v in op.attrs.items()
                         if v is not None and v is not False and v != "")
        note = op_note(op) if op_note else ""
        if note:
            attrs = f"{attrs} {note}" if attrs else note
        text = op.opcode
        if attrs:
            text += f" [{attrs}]"
        if args:
            text += " " + args
        if op.results:
            names = ", ".join(name_of(r) for r in op.results)
            types = ", ".join(typed(r) for r in op.results)
            text = f"{names} = {text} : {types}"
        if op.regions:
            text += " {"
        if op.loc is not None and locations:
            text += f"    // line {op.loc[1]}"
        lines.append(indent + text)
        for index, region in enumerate(op.regions):
            if index:
                lines.append(indent + "} {")
            block_args = ", ".join(f"{name_of(a)}: {typed(a)}" for a in region.args)
            lines.append(indent + f"^({block_args}):")
            _print_ops(region.body, name_of, typed, op_note, lines, indent + "  ", locations)
        if op.regions:
            lines.append(indent + "}")
