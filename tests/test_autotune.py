"""@aotk.autotune's JIT tuning: each configuration measured once per tuning key, the fastest
launched and kept in memory and on disk, reset_to_zero / restore_value and the hooks honoured
as in Triton, failing configurations skipped. On the CPU the launches run on the interpreter
(torch CPU tensors, AOTK_INTERPRET=1) with the GPU path forced and a stand-in timer; the GPU
test measures for real."""
import json

import pytest

import aotk
import aotk.language as tl
from aotk.autotune import Autotuner, AutotuneError

torch = pytest.importorskip("torch")

CONFIGS = [aotk.Config({"BLOCK": 16}, num_warps=1), aotk.Config({"BLOCK": 32}, num_warps=2),
           aotk.Config({"BLOCK": 64}, num_warps=4)]


@aotk.jit
def _accumulate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out += x (an atomic add: each launch adds once more)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.atomic_add(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


@aotk.jit
def _increment(x_ptr, n, BLOCK: tl.constexpr):
    """x += 1 in place."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


def _grid(meta):
    return (aotk.cdiv(meta["n"], meta["BLOCK"]),)


class FakeTimer:
    """do_bench's stand-in: runs the launch as do_bench would (a few times), and says the
    configuration of BLOCK == fastest took 1 ms, the others 2 ms."""

    def __init__(self, fastest):
        self.fastest, self.measured = fastest, []

    def __call__(self, launch, quantiles):
        for _ in range(3):
            launch()
        block = self.current["BLOCK"]
        self.measured.append(block)
        return [1.0 if block == self.fastest else 2.0] * len(quantiles)


@pytest.fixture
def as_on_a_gpu(monkeypatch, tmp_path):
    """Launches run on the interpreter while the autotuner takes its GPU path."""
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(Autotuner, "_on_gpu", staticmethod(lambda named: True))
    monkeypatch.setattr("aotk.launch.device.current_device", lambda: "Stand-in GPU (sm_90)")
    return tmp_path


def _tuned(kernel, timer, **options):
    tuner = aotk.autotune(CONFIGS, key=["n"], do_bench=timer, **options)(kernel)
    original = tuner.bench_config

    def bench(grid, args, kwargs, config):
        timer.current = config.kwargs
        return original(grid, args, kwargs, config)
    tuner.bench_config = bench
    return tuner


def test_each_config_is_measured_once_per_key_and_the_fastest_launched(as_on_a_gpu):
    timer = FakeTimer(fastest=32)
    tuner = _tuned(_increment, timer, restore_value=["x_ptr"])
    x = torch.zeros(100)
    tuner[_grid](x, 100)
    assert timer.measured == [16, 32, 64] and tuner.best_config.kwargs == {"BLOCK": 32}
    # What users log of the winner reads as Triton's str(best_config).
    assert str(tuner.best_config) == ("BLOCK: 32, num_warps: 2, num_ctas: 1, num_stages: 3, "
                                      "maxnreg: None")
    assert torch.equal(x, torch.ones(100))     # measured launches were undone: one increment
    tuner[_grid](x, 100)                       # the same key: nothing measured again
    assert timer.measured == [16, 32, 64] and torch.equal(x, torch.full((100,), 2.0))
    tuner[_grid](torch.zeros(50), 50)          # a new key
    assert timer.measured == [16, 32, 64] * 2
    tuner[_grid](torch.zeros(50, dtype=torch.float64), 50)   # the dtype is part of the key
    assert len(timer.measured) == 9
    assert set(tuner.cache) == {(100, "torch.float32"), (50, "torch.float32"),
                                (50, "torch.float64")}
    assert tuner.configs_timings[CONFIGS[1]] == [1.0, 1.0, 1.0]


def test_reset_to_zero_gives_one_launchs_result(as_on_a_gpu):
    timer = FakeTimer(fastest=64)
    tuner = _tuned(_accumulate, timer, reset_to_zero=["out_ptr"])
    x, out = torch.arange(100, dtype=torch.float32), torch.zeros(100)
    tuner[_grid](x, out, 100)
    assert torch.equal(out, x)       # 9 measured launches added to out, then it was reset


def test_without_reset_the_measuring_shows_in_the_result(as_on_a_gpu):
    """The control for the test above: the hooks are what keeps results right."""
    tuner = _tuned(_accumulate, FakeTimer(fastest=64))
    x, out = torch.arange(100, dtype=torch.float32), torch.zeros(100)
    tuner[_grid](x, out, 100)
    assert torch.equal(out, 10 * x)


def test_a_new_process_takes_the_winner_from_disk(as_on_a_gpu):
    first = FakeTimer(fastest=16)
    _tuned(_increment, first, restore_value=["x_ptr"])[_grid](torch.zeros(100), 100)
    records = list((as_on_a_gpu / "cache" / "autotune").glob("_increment-*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["best"] == 0
    again = FakeTimer(fastest=64)        # a fresh tuner (another process): nothing measured
    tuner = _tuned(_increment, again, restore_value=["x_ptr"])
    tuner[_grid](torch.zeros(100), 100)
    assert again.measured == [] and tuner.best_config.kwargs == {"BLOCK": 16}
    records[0].write_text("{damaged")    # a damaged record is measured again
    third = FakeTimer(fastest=64)
    tuner = _tuned(_increment, third, restore_value=["x_ptr"])
    tuner[_grid](torch.zeros(100), 100)
    assert third.measured == [16, 32, 64] and tuner.best_config.kwargs == {"BLOCK": 64}


def test_a_config_that_does_not_compile_is_skipped(as_on_a_gpu):
    configs = [aotk.Config({"BLOCK": 48}), aotk.Config({"BLOCK": 32})]   # 48: not a power of 2
    timer = FakeTimer(fastest=48)
    tuner = aotk.autotune(configs, key=["n"], do_bench=timer)(_increment)
    original = tuner.bench_config

    def bench(grid, args, kwargs, config):
        timer.current = config.kwargs
        return original(grid, args, kwargs, config)
    tuner.bench_config = bench
    x = torch.zeros(64)
    tuner[_grid](x, 64)
    assert tuner.best_config.kwargs == {"BLOCK": 32}
    assert tuner.configs_timings[configs[0]][0] == float("inf")

    broken = aotk.autotune([aotk.Config({"BLOCK": 48}), aotk.Config({"BLOCK": 24})], key=["n"],
                           do_bench=timer)(_increment)
    with pytest.raises(AutotuneError, match="no configuration could run.*BLOCK: 48.*powers of two"):
        broken[_grid](x, 64)


def test_pruning_hooks_choose_what_is_measured(as_on_a_gpu):
    timer = FakeTimer(fastest=64)
    seen = []

    def early(configs, named_args, **kwargs):
        seen.append(named_args["n"])
        return [c for c in configs if c.kwargs["BLOCK"] <= named_args["n"]]

    def model(BLOCK, n, **rest):
        return abs(BLOCK - 20)

    tuner = _tuned(_increment, timer, restore_value=["x_ptr"],
                   prune_configs_by={"early_config_prune": early, "perf_model": model,
                                     "top_k": 2})
    tuner[_grid](torch.zeros(40), 40)
    assert seen == [40] and timer.measured == [16, 32]     # 64 pruned; top 2 by the model
    with pytest.raises(AutotuneError, match="early_config_prune kept no configuration"):
        aotk.autotune(CONFIGS, key=["n"], prune_configs_by={
            "early_config_prune": lambda configs, named, **kw: []})(_increment)[_grid](
                torch.zeros(8), 8)


def test_user_hooks_replace_the_reset_hooks_and_see_reset_only(as_on_a_gpu):
    calls = []
    timer = FakeTimer(fastest=32)

    def pre(nargs, reset_only=False):
        calls.append(("pre", nargs["BLOCK"], reset_only))

    def post(nargs, exception):
        calls.append(("post", nargs["BLOCK"], exception))

    tuner = _tuned(_increment, timer, pre_hook=pre, post_hook=post)
    tuner[_grid](torch.zeros(64), 64)
    assert calls[:2] == [("pre", 16, False), ("post", 16, None)]
    assert calls[-1] == ("pre", 32, True)     # after measuring: reset only, for the winner
    assert len(calls) == 3 * 3 * 2 + 1


def test_the_interpreter_runs_the_first_kept_config_and_measures_nothing(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    timer = FakeTimer(fastest=64)
    tuner = aotk.autotune(CONFIGS, key=["n"], do_bench=timer)(_increment)
    x = torch.zeros(64)
    tuner[_grid](x, 64)
    assert timer.measured == [] and tuner.best_config.kwargs == {"BLOCK": 16}
    assert torch.equal(x, torch.ones(64))


class _CudaArray:
    """Stands for a CUDA tensor (what the launcher recognizes one by) without a GPU."""
    __cuda_array_interface__ = {}


def test_a_launch_whose_arrays_are_all_behind_descriptors_is_tuned():
    """liger's fused MLP takes only tensor descriptors and integers: it runs on the GPU, so
    it is measured there, not given the first config."""
    from aotk.tools.tensor_descriptor import TensorDescriptor
    descriptor = TensorDescriptor(_CudaArray(), [64, 64], [64, 1], [16, 16])
    assert Autotuner._on_gpu({"x_desc": descriptor, "n": 64})
    host = TensorDescriptor(torch.zeros(64, 64).numpy(), [64, 64], [64, 1], [16, 16])
    assert not Autotuner._on_gpu({"x_desc": host, "n": 64})
    assert not Autotuner._on_gpu({"n": 64})


@pytest.mark.gpu
def test_autotuning_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path))
    tuner = aotk.autotune(CONFIGS, key=["n"], reset_to_zero=["out_ptr"], warmup=5,
                          rep=10)(_accumulate)
    x = torch.randn(100_000, device="cuda")
    out = torch.zeros_like(x)
    tuner[_grid](x, out, x.numel())
    torch.cuda.synchronize()
    assert torch.equal(out, x)               # the measured launches were reset away
    assert len(tuner.configs_timings) == 3
    assert all(t[0] > 0 for t in tuner.configs_timings.values())
    assert tuner.best_config == min(tuner.configs_timings, key=tuner.configs_timings.get)
    assert len(list((tmp_path / "autotune").glob("_accumulate-*.json"))) == 1
    again = aotk.autotune(CONFIGS, key=["n"], reset_to_zero=["out_ptr"])(_accumulate)
    out.zero_()
    again[_grid](x, out, x.numel())
    assert again.best_config.kwargs == tuner.best_config.kwargs and torch.equal(out, x)


@aotk.jit
def _scale_tiles(in_desc, out_desc, BLOCK: tl.constexpr):
    row = tl.program_id(0) * BLOCK
    out_desc.store([row, 0], in_desc.load([row, 0]) * 2)


@pytest.mark.gpu
def test_a_kernel_taking_only_descriptors_is_measured_on_the_gpu(tmp_path, monkeypatch):
    from aotk.tools.tensor_descriptor import TensorDescriptor
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path))
    configs = [aotk.Config({"BLOCK": b}, num_warps=w) for b, w in ((16, 1), (32, 2))]

    def pre_hook(nargs):
        for name in ("in_desc", "out_desc"):
            nargs[name].block_shape = [nargs["BLOCK"], 32]
    configs = [aotk.Config(c.kwargs, num_warps=c.num_warps, pre_hook=pre_hook) for c in configs]
    tuner = aotk.autotune(configs, key=[], warmup=5, rep=10)(_scale_tiles)
    x = torch.randn(256, 32, device="cuda")
    out = torch.zeros_like(x)
    tuner[lambda meta: (256 // meta["BLOCK"],)](TensorDescriptor.from_tensor(x, [1, 32]),
                                                 TensorDescriptor.from_tensor(out, [1, 32]))
    torch.cuda.synchronize()
    assert len(tuner.configs_timings) == 2 and torch.equal(out, 2 * x)


@aotk.jit
def _spin(x_ptr, ITERS: tl.constexpr):
    """x[0..31] = ITERS dependent multiply-adds of themselves: GPU time grows with ITERS."""
    offsets = tl.arange(0, 32)
    value = tl.load(x_ptr + offsets)
    for _ in range(ITERS):
        value = value * 0.999 + 0.001
    tl.store(x_ptr + offsets, value)


@pytest.mark.gpu
def test_do_bench_can_time_the_gpu_alone_when_the_host_side_is_slower():
    """A call whose host side (2 ms) outlasts its kernel: the events time the host, unless
    the stream waits first (``hide_launch_time``)."""
    import time
    from aotk.testing import do_bench
    x = torch.ones(1024, device="cuda")

    def slow_to_launch():
        time.sleep(0.002)
        x.add_(1.0)
    assert do_bench(slow_to_launch, warmup=5, rep=20) > 1.5
    assert do_bench(slow_to_launch, warmup=5, rep=20, hide_launch_time=True) < 0.2


@pytest.mark.gpu
def test_the_autotuner_picks_by_gpu_time_when_launches_are_host_bound(tmp_path, monkeypatch):
    """Each measured launch spends 2 ms on the host (its pre-hook); one config's kernel
    runs 20,000 dependent steps (tens of microseconds), the other one. Timed with the host
    in the events, both are the same 2 ms and the pick is noise; the autotuner must time
    the kernels and keep the short one."""
    import time
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path))

    def slow_host(nargs):
        time.sleep(0.002)
    configs = [aotk.Config({"ITERS": 20_000}, num_warps=1, pre_hook=slow_host),
               aotk.Config({"ITERS": 1}, num_warps=1, pre_hook=slow_host)]
    tuner = aotk.autotune(configs, key=[], warmup=5, rep=20)(_spin)
    x = torch.ones(32, device="cuda")
    tuner[(1,)](x)
    torch.cuda.synchronize()
    long_run, short_run = (tuner.configs_timings[c][0] for c in configs)
    assert tuner.best_config.kwargs == {"ITERS": 1}
    # ms: the kernels' GPU times (tens of microseconds at most), not the 2 ms of the host.
    assert short_run < long_run < 1.0
