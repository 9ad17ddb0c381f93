"""aotk.language.core's value types reach the typing rules only through the hook that
aotk.semantic installs when imported; the module itself never imports aotk.semantic."""
import ast
import importlib.util
import inspect

import pytest

from aotk import semantic
from aotk.ir import types as T
from aotk.ir.kir import Value
from aotk.language import core


def test_core_imports_nothing_from_semantic():
    tree = ast.parse(inspect.getsource(core))
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names]
    assert not [name for name in imported if "semantic" in name]


def test_importing_the_language_installs_the_rules():
    x = core.tensor(Value(T.BlockType(T.int32)))
    with semantic.building(_NoBuilder()):
        with pytest.raises(_Reached):
            x + x


def test_operator_without_rules_is_a_clear_error():
    # A second copy of the module, which aotk.semantic never installed itself into.
    spec = importlib.util.spec_from_file_location("aotk.language.core_without_rules",
                                                  core.__file__)
    bare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bare)
    x = bare.tensor(Value(T.BlockType(T.int32)))
    with pytest.raises(RuntimeError, match="typing rules of aotk.semantic"):
        x + x
    with pytest.raises(RuntimeError, match="import aotk.language"):
        x.to(T.float32)


class _Reached(Exception):
    pass


class _NoBuilder:
    """Stops at the first op a rule appends: reaching it shows the rules ran."""

    def create(self, *args, **kwargs):
        raise _Reached
