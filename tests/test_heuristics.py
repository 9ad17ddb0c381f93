"""@heuristics ahead of time: a heuristic that is integer arithmetic or a comparison over the
launch's scalar arguments becomes part of the dispatch's condition, so the library runs a
variant only where its constexpr is what Triton's heuristic would compute; anything else
needs the manifest to say where each value holds."""
import ctypes

import pytest

import aotk
from aotk.buildsys.expressions import evaluate
from aotk.buildsys.heuristics import HeuristicError, condition, to_expression
from aotk.buildsys.manifest import ManifestError

next_power_of_2 = aotk.next_power_of_2
_SAME_LINE = (lambda args: args["a"] + 1, lambda args: args["a"] * 2)   # two on one line


@pytest.mark.parametrize("function, text, truth", [
    (lambda args: args["n"] % args["BLOCK"] == 0, "((n % BLOCK) == 0)", True),
    (lambda args: aotk.next_power_of_2(args["n"]), "next_power_of_2(n)", False),
    (lambda args: next_power_of_2(args["n"]), "next_power_of_2(n)", False),
    (lambda args: min(args["n"], 1024), "min(n, 1024)", False),
    (lambda args: 64 if args["K"] > 4096 else 32, "((K > 4096) ? 64 : 32)", False),
    (lambda args: 0 < args["n"] <= 512, "((0 < n) && (n <= 512))", True),
    (lambda args: not (args["n"] > 8 and args["m"] < 2), "!(((n > 8) && (m < 2)))", True),
    (lambda args: aotk.cdiv(args["n"], 32) // 2, "(cdiv(n, 32) / 2)", False),
    (_SAME_LINE[1], "(a * 2)", False),
])
def test_a_heuristic_becomes_an_expression(function, text, truth):
    assert to_expression(function) == (text, truth)


@pytest.mark.parametrize("function", [
    lambda args: args["n"] % args["BLOCK"] == 0,
    lambda args: min(aotk.next_power_of_2(args["n"]), 256) + (args["m"] >> 2),
    lambda args: 64 if args["n"] > 1000 and not args["m"] % 3 else args["n"] // 7,
    lambda args: (args["n"] * args["m"] - 5) | 3,
])
def test_the_expression_computes_what_the_heuristic_does(function):
    """Evaluated by C's rules (buildsys.expressions, as the generated C computes it) on
    non-negative sizes, the expression gives the heuristic's own value."""
    text, _ = to_expression(function)
    for n in (0, 1, 7, 100, 1023, 1024, 5000):
        for m in (0, 3, 10, 999):
            values = {"n": n, "m": m, "BLOCK": 128}
            assert evaluate(text, values) == int(function(values)), (text, values)


def _named(args):
    return args["n"]


@pytest.mark.parametrize("function, message", [
    (lambda args: args["x_ptr"].dtype.itemsize, "it uses `args['x_ptr'].dtype.itemsize`"),
    (lambda args: len(args), "it uses `len(args)`"),
    (_named, "it is not a lambda"),
    (lambda args: args["s"] == "relu", "it uses `'relu'`"),
])
def test_other_heuristics_say_what_they_use(function, message):
    with pytest.raises(HeuristicError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        to_expression(function)


def test_conditions_for_a_value():
    assert condition("((n % 16) == 0)", True, True) == "(((n % 16) == 0))"
    assert condition("((n % 16) == 0)", True, False) == "!(((n % 16) == 0))"
    assert condition("next_power_of_2(n)", False, 128) == "(next_power_of_2(n)) == 128"


KERNEL = """\
import triton
import triton.language as tl


@triton.heuristics({{{heuristics}}})
@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * 2)
    else:
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)
"""

EVEN = '"EVEN": lambda args: args["n"] % args["BLOCK"] == 0'
BLOCK = '"BLOCK": lambda args: min(triton.next_power_of_2(args["n"]), 256)'

MANIFEST = """\
[library]
name = "heur"
targets = ["sm_80"]

[[kernel]]
name = "scale"
source = "kernels.py"
function = "scale"
signature = "*fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
specialize = "none"
"""


def _build(tmp_path, heuristics, variants):
    (tmp_path / "kernels.py").write_text(KERNEL.format(heuristics=heuristics))
    (tmp_path / "aotk.toml").write_text(MANIFEST + variants)
    return aotk.build(tmp_path / "aotk.toml")


def _chosen(result):
    lib = ctypes.CDLL(str(result.library))
    lib.heur_scale_variant_name.restype = ctypes.c_char_p

    def chosen(n):
        index = lib.heur_scale_select(ctypes.c_void_p(16), ctypes.c_void_p(16),
                                      ctypes.c_int32(n))
        return None if index < 0 else lib.heur_scale_variant_name(index).decode()
    return chosen


def test_a_comparison_heuristic_is_built_for_both_values_and_chosen_as_triton_would(tmp_path):
    result = _build(tmp_path, EVEN, "constants = { BLOCK = 128 }\n")
    chosen = _chosen(result)
    assert chosen(256) == chosen(128) == "scale[BLOCK=128, EVEN=True]"
    assert chosen(200) == chosen(1) == "scale[BLOCK=128, EVEN=False]"


def test_a_numeric_heuristic_picks_the_variant_giving_its_value(tmp_path):
    variants = "".join(f"\n[[kernel.variant]]\nconstants = {{ BLOCK = {b} }}\n"
                       for b in (64, 128, 256))
    result = _build(tmp_path, f"{BLOCK}, {EVEN}", variants)
    chosen = _chosen(result)
    assert chosen(64) == "scale[BLOCK=64, EVEN=True]"
    assert chosen(100) == "scale[BLOCK=128, EVEN=False]"
    assert chosen(1000) == "scale[BLOCK=256, EVEN=False]" and chosen(1024) == \
        "scale[BLOCK=256, EVEN=True]"
    assert chosen(3) is None     # next_power_of_2(3) = 4: no variant gives it, none runs


@pytest.mark.gpu
def test_on_the_gpu_the_heuristics_dispatch_launches_the_right_build(tmp_path):
    """The generated C evaluates the heuristics per call and the chosen build runs: the
    EVEN=True builds touch no element past n only because n divides; an unmasked build
    chosen for an uneven n would write past it."""
    torch = pytest.importorskip("torch")
    variants = "".join(f"\n[[kernel.variant]]\nconstants = {{ BLOCK = {b} }}\n"
                       for b in (64, 128, 256))
    lib = aotk.load(_build(tmp_path, f"{BLOCK}, {EVEN}", variants).library)
    for n in (64, 100, 128, 1000, 1024, 5000):
        x = torch.randn(n, device="cuda")
        out = torch.full((n + 512,), -1.0, device="cuda")
        lib.scale(x, out, n)
        torch.cuda.synchronize()
        torch.testing.assert_close(out[:n], 2 * x)
        assert (out[n:] == -1).all(), n


def test_a_numeric_heuristic_without_values_is_one_error(tmp_path):
    with pytest.raises(ManifestError, match=r"kernel\.scale\.variant\[0\]\.constants: no value "
                                            r"for BLOCK, which @heuristics computes as "
                                            r"min\(next_power_of_2\(n\), 256\)"):
        _build(tmp_path, f"{BLOCK}, {EVEN}", "")


def test_a_heuristic_aotk_cannot_read_needs_the_manifests_when(tmp_path):
    unreadable = '"EVEN": lambda args: args["x_ptr"].numel() % 128 == 0'
    with pytest.raises(ManifestError, match=r"kernel\.scale\.variant\[0\]\.when: EVEN = True "
                                            r"comes from @heuristics .* give this variant a "
                                            r"`when`"):
        _build(tmp_path, unreadable, "constants = { BLOCK = 128, EVEN = true }\n")
    result = _build(tmp_path, unreadable,
                    'when = "n % 128 == 0"\nconstants = { BLOCK = 128, EVEN = true }\n\n'
                    '[[kernel.variant]]\nwhen = "n % 128 != 0"\n'
                    'constants = { BLOCK = 128, EVEN = false }\n')
    chosen = _chosen(result)
    assert chosen(256) == "scale[BLOCK=128, EVEN=True]" and chosen(5) == \
        "scale[BLOCK=128, EVEN=False]"


def test_next_power_of_2_is_tritons_on_the_host_and_in_the_generated_c(tmp_path):
    triton = pytest.importorskip("triton")
    for n in range(-5, 300):
        assert aotk.next_power_of_2(n) == triton.next_power_of_2(n) == evaluate(
            "next_power_of_2(n)", {"n": n}), n
