"""The JIT launch's hot path without a GPU: the driver's per-launch entry points stood in
for by Python callables where ctypes would call libcuda (``launch.device.HotDriver``), and
what one launch hands cuLaunchKernel read back from the memory it points to."""
import ctypes
import struct

import pytest

import aotk
import aotk.language as tl
from aotk.errors import AotkError
from aotk.launch import device
from tests.test_launch_arguments import FakeCudaArray


class FakeFunction:
    """A loaded CUfunction: what the launch passes is its handle, ``int(function)``."""

    def __int__(self):
        return 0xABC0


class FakeLibcuda:
    """libcuda's three hot entry points; cuLaunchKernel copies out what it was given."""

    def __init__(self, context=0x5000, context_id=7, has_id=True, result=0):
        self.launches, self.result = [], result

        def get_current(pointer):
            pointer._obj.value = context
            return 0

        def get_id(_context, pointer):
            pointer._obj.value = context_id
            return 0

        def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            words = (ctypes.c_void_p * 5).from_address(extra)
            size = ctypes.c_size_t.from_address(words[3]).value
            self.launches.append({"function": function, "grid": (gx, gy, gz),
                                  "block": (bx, by, bz), "shared": shared, "stream": stream,
                                  "params": params, "markers": (words[0], words[2], words[4]),
                                  "buffer": ctypes.string_at(words[1], size)})
            return self.result

        self.cuCtxGetCurrent, self.cuLaunchKernel = get_current, launch
        if has_id:
            self.cuCtxGetId = get_id


@aotk.jit
def _scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    pass


@pytest.fixture
def hot(monkeypatch):
    library = FakeLibcuda()
    monkeypatch.setattr(device, "_hot", device.HotDriver(library))
    monkeypatch.setattr(device, "_launchable", {})   # no fake function outlives the test
    monkeypatch.setattr(device, "_load_function",
                        lambda *args, **kwargs: (FakeFunction(), {"shared": 256}))
    return library


def test_a_launch_hands_the_driver_the_packed_parameters(hot):
    x, out = FakeCudaArray(0x10000), FakeCudaArray(0x20004)
    _scale[(3, 2)](x, out, 1000, 0.5, BLOCK=128, num_warps=8)
    (launch,) = hot.launches
    assert launch["function"] == 0xABC0 and launch["grid"] == (3, 2, 1)
    assert launch["block"] == (256, 1, 1) and launch["shared"] == 256
    assert not launch["stream"] and launch["params"] is None   # default stream; extra only
    assert launch["markers"] == (device.LAUNCH_PARAM_BUFFER_POINTER,
                                 device.LAUNCH_PARAM_BUFFER_SIZE, None)   # END is NULL
    # x, out (u64), n (i32), factor (f32): C layout, no padding needed.
    assert launch["buffer"] == struct.pack("@QQif", 0x10000, 0x20004, 1000, 0.5)


def test_the_context_key_comes_from_the_hot_path(hot):
    assert device._current_context_key() == (0x5000, 7)
    without_id = device.HotDriver(FakeLibcuda(context=0x6000, has_id=False))
    assert without_id.context_key() == (0x6000, 0)
    assert device.HotDriver(FakeLibcuda(context=0)).context_key() is None   # no context


def test_a_failed_launch_is_an_error_naming_the_kernel(hot, monkeypatch):
    hot.result = 700   # CUDA_ERROR_ILLEGAL_ADDRESS

    class Driver:
        class CUresult(int):
            CUDA_SUCCESS = 0

        @staticmethod
        def cuGetErrorName(error):
            return 0, b"CUDA_ERROR_ILLEGAL_ADDRESS"

    monkeypatch.setattr(device, "_driver", lambda: Driver)
    with pytest.raises(AotkError, match="launching _scale failed: CUDA_ERROR_ILLEGAL_ADDRESS"):
        _scale[(1,)](FakeCudaArray(0x10000), FakeCudaArray(0x20000), 8, 1.0, BLOCK=128)


def test_each_launch_hands_over_its_own_parameters(hot):
    """The parameter buffer is packed anew for each launch (one buffer per thread,
    reused: cuLaunchKernel copies it before it returns)."""
    x, out = FakeCudaArray(0x10000), FakeCudaArray(0x20000)
    for n in (1000, 2000):
        _scale[(1,)](x, out, n, 0.25, BLOCK=128)
    assert [launch["buffer"] for launch in hot.launches] == [
        struct.pack("@QQif", 0x10000, 0x20000, n, 0.25) for n in (1000, 2000)]


def test_threads_launching_at_once_pack_into_buffers_of_their_own(hot, monkeypatch):
    """Two threads each pack their launch, then both are inside cuLaunchKernel before
    either reads its buffer: a buffer shared between threads would hand one of them the
    other's parameters. (n 3 and 5: one signature, so one packing for both.)"""
    import threading
    both_packed = threading.Barrier(2, timeout=10)
    record = hot.cuLaunchKernel

    def launch(*arguments):
        both_packed.wait()
        return record(*arguments)
    hot.cuLaunchKernel = launch
    monkeypatch.setattr(device, "_hot", device.HotDriver(hot))
    threads = [threading.Thread(target=lambda n=n: _scale[(1,)](
        FakeCudaArray(0x10000 * n), FakeCudaArray(0x20000), n, 0.5, BLOCK=128))
        for n in (3, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(launch["buffer"] for launch in hot.launches) == sorted(
        struct.pack("@QQif", 0x10000 * n, 0x20000, n, 0.5) for n in (3, 5))
