"""Compute units: the host splits a launch's range across the CUs the image has (read from the
image), and the CUs run concurrently (threads on the emulated device). Per-CU accounting
(aten_fpga._C.cu_activity) records each CU's last run: when it ran, on which host thread, and
its arguments -- so these tests fail if CUs ran one after another, on one thread, or on
overlapping or missing parts of the range."""
import pytest
import torch

import aten_fpga
from runtime_support import exact

MIN_PER_CU = 1 << 14  # fpga_kernel splits only when every CU gets at least this many elements


@pytest.fixture
def multi_cu():
    aten_fpga.load(3)  # the multi-CU level: the streaming engines have 2 CUs unless scons cus= says otherwise
    yield aten_fpga._C.kernel_cus("v_add_float32")
    aten_fpga.load(4)


def runs_of(activity):
    return [a["runs"] for a in activity]


def test_each_level_brings_its_own_kernels_and_cu_count(multi_cu):
    # Images loaded one after another in a process must not share kernels (each .so registers
    # its own): the port width tells the vectorized level 4 from the others.
    port_bytes = {}
    for level in (4, 3, 1, 2, 3):
        aten_fpga.load(level)
        (name, is_pointer, port_bytes[level], _) = aten_fpga._C.kernel_args("v_add_float32")[0]
        assert name == "in1" and is_pointer
        assert aten_fpga._C.kernel_cus("v_add_float32") == (1 if level in (1, 2) else 2)
    assert port_bytes == {1: 4, 2: 4, 3: 4, 4: 64}


def test_cus_run_concurrently_on_disjoint_ranges_that_cover_the_tensor(multi_cu):
    cus = multi_cu
    n = (1 << 24) + 37  # ~40 ms per CU run: long against thread wake-up and time slices
    a, b = torch.randn(n), torch.randn(n)
    x, y = a.to("fpga"), b.to("fpga")
    out = x + y  # warm-up: syncs the inputs, touches the output's fresh pages
    before = runs_of(aten_fpga._C.cu_activity())
    torch.add(x, y, alpha=0.5, out=out)
    activity = aten_fpga._C.cu_activity()[:cus]
    exact(out, torch.add(a, b, alpha=0.5))

    # Every CU ran exactly once for this launch.
    assert [r - p for r, p in zip(runs_of(activity), before)] == [1] * cus
    # Concurrently: each on its own host thread, and all in flight together. Serial runs would
    # span at least the sum of their durations; concurrent ones (4 threads, 2 cores) far less.
    assert len({a["last_thread"] for a in activity}) == cus
    starts = [a["last_start_ns"] for a in activity]
    ends = [a["last_end_ns"] for a in activity]
    span, busy = max(ends) - min(starts), sum(e - s for s, e in zip(starts, ends))
    assert span < 0.8 * busy, (starts, ends)
    # Disjoint ranges, in CU order, covering [0, n): arguments are (in1, in2, out, alpha, size).
    ranges = []
    for a in activity:
        (k1, in1), (k2, in2), (k3, o), (k4, alpha), (k5, size) = a["last_args"]
        assert (k1, k2, k3, k4, k5) == ("buffer", "buffer", "buffer", "scalar", "scalar")
        assert in1 == in2 == o and o % 4 == 0
        ranges.append((o // 4, o // 4 + size))
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(ranges[i][1] == ranges[i + 1][0] for i in range(cus - 1)), ranges
    sizes = [hi - lo for lo, hi in ranges]
    assert len(set(sizes[:-1])) == 1 and 0 <= sizes[0] - sizes[-1] < cus  # balanced: ceil(n / cus) each


def test_small_launches_use_one_cu(multi_cu):
    before = runs_of(aten_fpga._C.cu_activity())
    a = torch.randn(2 * MIN_PER_CU - 1)
    exact(a.to("fpga") * a.to("fpga"), a * a)
    after = runs_of(aten_fpga._C.cu_activity())
    ran = [r - p for r, p in zip(after, before)]  # per CU index (as many as any image so far had)
    assert ran[0] == 1 and not any(ran[1:]), ran


@pytest.mark.parametrize("n", [2 * MIN_PER_CU, 3 * MIN_PER_CU + 5, 4 * MIN_PER_CU - 1, 5 * MIN_PER_CU + 3])
def test_split_sizes(multi_cu, n):
    before = runs_of(aten_fpga._C.cu_activity())
    a, b = torch.randn(n), torch.randn(n)
    exact(a.to("fpga") + b.to("fpga"), a + b)
    used = sum(r > p for r, p in zip(runs_of(aten_fpga._C.cu_activity()), before))
    assert used == min(multi_cu, n // MIN_PER_CU)
