"""aotk.torch: a built library's kernels as torch.ops operators (torch.library.custom_op).
On the CPU: the schema, the namespace rules, and torch.compile(fullgraph=True) tracing a
function that calls them on meta tensors (the fake implementation, no launch). On the GPU:
the operators compute what the library does, eagerly and compiled by inductor."""
import pytest

import aotk
from tests.conftest import tree_pythonpath

torch = pytest.importorskip("torch")
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return aotk.load(aotk.build(ROOT / "aotk.toml",
                                out_dir=tmp_path_factory.mktemp("torch-ops")).library)


@pytest.fixture(scope="module")
def ops(library):
    return aotk.torch.register(library, namespace="aotk_test_examples")


def test_every_kernel_is_an_operator_whose_pointers_are_mutated_tensors(library, ops):
    assert all(hasattr(ops, name) for name in library.kernels)
    schema = str(torch.ops.aotk_test_examples.add.default._schema)
    assert schema == ("aotk_test_examples::add(Tensor(a0!) x_ptr, Tensor(a1!) y_ptr, "
                      "Tensor(a2!) out_ptr, SymInt n) -> ()")
    assert "float eps" in str(torch.ops.aotk_test_examples.layer_norm.default._schema)


def test_registering_again_gives_the_same_operators_and_a_taken_namespace_is_refused(
        library, ops, tmp_path):
    assert aotk.torch.register(library, namespace="aotk_test_examples") is ops
    other = tmp_path / "copy" / library.path.rsplit("/", 1)[1]
    other.parent.mkdir()
    other.write_bytes(Path(library.path).read_bytes())
    with pytest.raises(ValueError, match="torch.ops.aotk_test_examples already holds"):
        aotk.torch.register(aotk.load(other), namespace="aotk_test_examples")


def test_torch_compile_fullgraph_traces_through_the_operators(ops):
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    def softmax_of_sum(x, y, out, probabilities):
        ops.add(x, y, out, x.numel())
        ops.softmax(probabilities, out, x.shape[1], x.shape[1], x.shape[0], x.shape[1])
        return probabilities * 2

    x, y, out, probabilities = (torch.empty(8, 1024, device="meta") for _ in range(4))
    result = torch.compile(softmax_of_sum, fullgraph=True, backend=backend)(
        x, y, out, probabilities)
    assert result.shape == (8, 1024) and result.device.type == "meta"
    assert len(graphs) == 1
    called = [str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"]
    assert any("aotk_test_examples.add" in target for target in called)
    assert any("aotk_test_examples.softmax" in target for target in called)


@pytest.mark.gpu
def test_on_the_gpu_the_operators_compute_what_the_library_does(library, ops):
    x, y = torch.randn(8, 1024, device="cuda"), torch.randn(8, 1024, device="cuda")

    def softmax_of_sum(x, y):
        out, probabilities = torch.empty_like(x), torch.empty_like(x)
        ops.add(x, y, out, x.numel())
        ops.softmax(probabilities, out, 1024, 1024, 8, 1024)
        return probabilities

    eager = softmax_of_sum(x, y)
    compiled = torch.compile(softmax_of_sum, fullgraph=True)(x, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(eager, torch.softmax(x + y, dim=1))
    torch.testing.assert_close(compiled, eager)


@pytest.mark.gpu
def test_on_the_gpu_the_example_runs():
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": tree_pythonpath()}
    subprocess.run([sys.executable, "-m", "aotk", "build", str(ROOT / "aotk.toml")], check=True,
                   cwd=ROOT, env=env)
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "torch_ops.py")],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("OK")
