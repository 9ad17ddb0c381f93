"""Signature: the one parser and printer of "*fp32:16, i32", and each of its users."""
import ast
import pathlib

import pytest

import aotk
from aotk.ir import types as T
from aotk.ir.signature import Signature, SignatureError, SignatureParameter

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMES = ("x_ptr", "out_ptr", "n", "scale")


@pytest.mark.parametrize("text, canonical", [
    ("*fp32:16, *fp16, i32:1, fp32", "*fp32:16, *fp16, i32:1, fp32"),
    ("  *fp32:16 ,*fp16,i32 : 1,  fp32 ,", "*fp32:16, *fp16, i32:1, fp32"),
    ("*float32:16, *float16, int32:1, float32", "*fp32:16, *fp16, i32:1, fp32"),
    ("*bf16:8, *i8:4, u64:2, fp64", "*bf16:8, *i8:4, u64:2, fp64"),
])
def test_text_round_trips_through_the_canonical_form(text, canonical):
    signature = Signature.parse(text, NAMES)
    assert str(signature) == canonical
    assert Signature.parse(str(signature), NAMES) == signature


def test_parameters_types_and_hints():
    signature = Signature.parse("*fp32:16, *fp16, i32:1, fp32", NAMES)
    assert signature.names == NAMES
    assert signature.types == {"x_ptr": T.PointerType(T.float32),
                               "out_ptr": T.PointerType(T.float16),
                               "n": T.int32, "scale": T.float32}
    assert signature.hints == {"x_ptr": 16, "n": 1}
    assert signature["out_ptr"] == SignatureParameter("out_ptr", T.PointerType(T.float16), None)
    assert [p.name for p in signature] == list(NAMES) and len(signature) == 4
    with pytest.raises(KeyError):
        signature["y_ptr"]


def test_mapping_form_is_keyed_by_name_and_prints_in_kernel_order():
    mapping = {"scale": "fp32", "n": "i32:16", "out_ptr": "*fp16", "x_ptr": "*fp32:16"}
    signature = Signature.parse(mapping, NAMES)
    assert str(signature) == "*fp32:16, *fp16, i32:16, fp32"
    assert signature == Signature.parse("*fp32:16, *fp16, i32:16, fp32", NAMES)


def test_from_types_matches_parse():
    types = {"x_ptr": T.PointerType(T.float32), "out_ptr": T.PointerType(T.float16),
             "n": T.int32, "scale": T.float32}
    signature = Signature.from_types(types, {"x_ptr": 16, "n": 1})
    assert signature == Signature.parse("*fp32:16, *fp16, i32:1, fp32", NAMES)
    reordered = Signature.from_types(dict(reversed(types.items())), names=NAMES)
    assert reordered == Signature.parse("*fp32, *fp16, i32, fp32", NAMES)


def test_a_signature_object_is_taken_as_it_is_when_the_names_agree():
    signature = Signature.parse("*fp32, *fp16, i32, fp32", NAMES)
    assert Signature.parse(signature, NAMES) is signature
    with pytest.raises(SignatureError, match=r"signature is for \(x_ptr, out_ptr, n, scale\) "
                                             r"but add has runtime parameters \(a, b, c, d\)"):
        Signature.parse(signature, ("a", "b", "c", "d"), "add")


@pytest.mark.parametrize("signature, message", [
    ("*fp32, *fp32, i32", "signature has 3 entries but k has 4 runtime parameters "
                          "(x_ptr, out_ptr, n, scale)"),
    ({"x_ptr": "*fp32", "y": "*fp32"}, "signature names ['y'] which are not runtime "
                                       "parameters of k (x_ptr, out_ptr, n, scale)"),
    ({"x_ptr": "*fp32", "n": "i32"}, "signature lacks a type for out_ptr, scale"),
    ("*fp33, *fp32, i32, fp32", "unknown type 'fp33' (expected one of: i1 i8 i16 i32 i64 u8 "
                                "u16 u32 u64 fp16 bf16 fp32 fp64 fp8e4nv fp8e5 fp8e4b15, or *T for a pointer)"),
    ("*fp32, *fp32, i32:3, fp32", "hint :3 on n is not supported (use :1, :2, :4, :8 or :16)"),
    ("*fp32, *fp32, i32:x, fp32", "hint :x on n is not supported (use :1, :2, :4, :8 or :16)"),
    ("*fp32, *fp32, i32:32, fp32", "hint :32 on n is not supported (use :1, :2, :4, :8 or :16)"),
    ("*fp32:1, *fp32, i32, fp32", "hint :1 needs an integer parameter, x_ptr is "
                                  "pointer<float32>"),
    ("*fp32, *fp32, i32, fp32:1", "hint :1 needs an integer parameter, scale is float32"),
    ("*fp32, *fp32, i32, fp32:16", "float parameter scale cannot carry a hint"),
    (["*fp32"], "expected a signature like \"*fp32:16, i32\" or {param: \"*fp32:16\"}, "
                "got ['*fp32']"),
])
def test_every_error_names_what_is_wrong(signature, message):
    with pytest.raises(SignatureError) as error:
        Signature.parse(signature, NAMES, "k")
    assert str(error.value) == message


def test_signature_error_is_a_value_error():
    assert issubclass(SignatureError, ValueError)


def test_a_signature_built_directly_is_checked_too():
    with pytest.raises(SignatureError, match="float parameter scale cannot carry a hint"):
        Signature((SignatureParameter("scale", T.float32, 16),))


def test_specialized_adds_16_where_no_hint_was_given():
    signature = Signature.parse("*fp32, *fp16:4, i32, i32:1, i64, i1, fp32, u8",
                                ("a", "b", "c", "d", "e", "f", "g", "h"))
    assert str(signature.specialized()) == "*fp32:16, *fp16:4, i32:16, i32:1, i64:16, i1, " \
                                           "fp32, u8:16"
    assert signature.specialized().specialized() == signature.specialized()


def test_cache_key_is_stable_and_tells_signatures_apart():
    one = Signature.parse("*fp32:16, *fp16, i32:1, fp32", NAMES)
    assert one.cache_key == "x_ptr=*fp32:16, out_ptr=*fp16, n=i32:1, scale=fp32"
    assert one.cache_key == Signature.parse(str(one), NAMES).cache_key
    assert one.cache_key != Signature.parse("*fp32:16, *fp16, i32:16, fp32", NAMES).cache_key
    assert one.cache_key != Signature.parse("*fp32:16, *fp16, i32:1, fp32",
                                            ("a", "b", "c", "d")).cache_key
    assert hash(one) == hash(Signature.parse(str(one), NAMES))


# -- the users: each takes and gives the one type ------------------------------------


def test_compile_takes_text_mapping_or_signature_and_keeps_it():
    from tests.kernels.elementwise import add_kernel
    text = "*fp32:16, *fp32:16, *fp32:16, i32"
    compiled = aotk.compile(add_kernel, text, {"BLOCK": 256})
    assert compiled.signature == Signature.parse(text, add_kernel.runtime_names)
    again = aotk.compile(add_kernel, compiled.signature, {"BLOCK": 256})
    by_name = aotk.compile(add_kernel, dict(zip(add_kernel.runtime_names, text.split(", "))),
                           {"BLOCK": 256})
    assert again.ptx == compiled.ptx == by_name.ptx


def test_kir_is_memoized_on_the_signature():
    from tests.kernels.elementwise import add_kernel
    signature = Signature.parse("*fp32:16, *fp32, *fp32, i32:16", add_kernel.runtime_names)
    function = add_kernel.kir(signature, constants={"BLOCK": 64})
    assert add_kernel.kir(signature.types, signature.hints, {"BLOCK": 64}) is function
    assert [p.hint for p in function.params] == [16, None, None, 16]
    assert add_kernel.kir(signature.specialized(), constants={"BLOCK": 64}) is not function


def test_plan_builds_signatures_and_cgen_reads_their_hints():
    from aotk.buildsys.cgen import describe
    from aotk.buildsys.manifest import load_manifest
    from aotk.buildsys.plan import plan_builds
    plans = {p.kernel.name: p for p in plan_builds(load_manifest(ROOT / "aotk.toml"))}
    add = plans["add"]
    aligned, generic = add.builds[:2]
    assert isinstance(aligned.signature, Signature)
    assert str(aligned.signature) == "*fp32:16, *fp32:16, *fp32:16, i32:16"
    assert aligned.signature == generic.signature.specialized()
    assert str(generic.signature) == "*fp32, *fp32, *fp32, i32"
    assert "assumes AOTK_ALIGNED(x_ptr, 16), AOTK_ALIGNED(y_ptr, 16), " \
           "AOTK_ALIGNED(out_ptr, 16), n % 16 == 0" in describe(add, aligned)
    assert "no alignment or divisibility assumed" in describe(add, generic)
    matmul = plans["matmul"].builds[1]    # the variant of ":8" and ":1" hints, as written
    assert str(matmul.signature) == "*fp16:16, *fp16:16, *fp16:16, i32:8, i32:8, i32:8, " \
                                    "i32:8, i32:1, i32:8, i32:1, i32:8, i32:1"
    assert "M % 8 == 0, N % 8 == 0, K % 8 == 0, stride_am % 8 == 0, stride_ak == 1" \
        in describe(plans["matmul"], matmul)


def test_no_other_module_splits_or_joins_signature_text():
    """Signature text is read and written in aotk/ir/signature.py alone: elsewhere no
    `.split(",")` or `.partition(":")` of an entry, no `.short + ":"` assembly."""
    offenders = []
    # semantic/inline_asm.py splits PTX constraint lists ("=r,r"), which are not signatures.
    readers = (ROOT / "aotk" / "ir" / "signature.py", ROOT / "aotk" / "semantic" / "inline_asm.py")
    for path in sorted((ROOT / "aotk").rglob("*.py")) + sorted((ROOT / "cli").rglob("*.py")):
        if path in readers:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("split", "partition") and node.args \
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in (",", ":"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and \
                    isinstance(node.left, ast.Attribute) and node.left.attr == "short":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_a_pickled_signature_leaves_its_cached_values_behind():
    import pickle
    signature = Signature.parse("*fp32:16, *fp16, i32:1, fp32", NAMES)
    assert {signature} and signature.types and signature.cache_key   # computed, so cached
    assert {"_hash", "types", "cache_key"} <= set(vars(signature))
    copy = pickle.loads(pickle.dumps(signature))
    assert copy == signature and copy.cache_key == signature.cache_key
    assert "_hash" not in vars(copy) and "types" not in vars(copy)
