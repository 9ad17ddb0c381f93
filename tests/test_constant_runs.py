"""``backend.per_register.run_width``: which of a thread's registers along an axis hold one
run of equal values (axis info's constancy, runs aligned on its multiples), checked against
every thread's actual indices. A wrong width would give two elements of different runs one
computed value: a mask wrong on some rows, the worst kind of bug."""
import itertools

import pytest

from aotk.backend.per_register import run_width
from aotk.passes.layouts import Blocked


def _thread_indices(blocked: Blocked, axis: int, size: int, lane: int, warp: int) -> list:
    """The indices along ``axis`` a thread holds, as backend.geometry computes them: its
    base (size per thread x its lane and warp coordinates, masked to the size where the
    layout wraps) plus each slot's offset."""
    lane_stride, warp_stride = blocked.strides(axis)
    lane_coord = lane // lane_stride % blocked.threads_per_warp[axis]
    warp_coord = warp // warp_stride % blocked.warps_per_cta[axis]
    base = (warp_coord * blocked.threads_per_warp[axis] + lane_coord) * \
        blocked.size_per_thread[axis]
    if blocked.tile(axis) > size:
        base &= size - 1
    return [base + offset for offset in blocked.slot_offsets(axis, size)]


LAYOUTS = [Blocked(spt, tpw, wpc, order)
           for spt, tpw, wpc, order in [
               ((1, 4), (1, 32), (4, 1), (1, 0)),     # mhc's [32, 128] tiles
               ((1, 1), (4, 8), (1, 4), (0, 1)),
               ((2, 4), (8, 4), (2, 2), (1, 0)),
               ((4, 1), (4, 8), (1, 8), (0, 1)),
               ((1, 8), (32, 1), (2, 2), (1, 0)),
           ]]


@pytest.mark.parametrize("blocked", LAYOUTS, ids=str)
@pytest.mark.parametrize("axis", [0, 1])
def test_registers_grouped_by_the_width_are_in_one_run_on_every_thread(blocked, axis):
    checked = 0
    for size, constancy in itertools.product([1, 2, 4, 8, 16, 32, 64, 128, 256],
                                             [1, 2, 4, 8, 16, 32, 64, 128, 256]):
        if constancy > size:
            continue
        width = run_width(blocked, axis, size, constancy)
        offsets = blocked.slot_offsets(axis, size)
        for lane, warp in itertools.product(range(32), range(8)):
            indices = _thread_indices(blocked, axis, size, lane, warp)
            runs = {}
            for offset, index in zip(offsets, indices):
                runs.setdefault(offset // width, set()).add(index // constancy)
            assert all(len(found) == 1 for found in runs.values()), \
                (blocked, axis, size, constancy, width, lane, warp, runs)
        checked += 1
    assert checked > 30


def test_the_rows_of_mhcs_tiles_group_across_the_warps():
    """[32, 128] with 4 warps along the rows: a thread's 8 rows are one run of 32, two of
    16; within a vector of 4 columns the old rule's limit (size per thread) still holds."""
    blocked = LAYOUTS[0]
    assert run_width(blocked, 0, 32, 32) == 32 and run_width(blocked, 0, 32, 16) == 16
    assert run_width(blocked, 0, 32, 2) == 1           # runs shorter than the warps' 4 rows
    assert run_width(blocked, 1, 128, 128) == 128 and run_width(blocked, 1, 128, 2) == 2
