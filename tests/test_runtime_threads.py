"""Thread safety: ops from 4 Python threads (PyTorch releases the GIL inside ops, so they run
concurrently in the runtime) on shared and separate tensors, on the single- and the multi-CU
image, give the CPU's results; the allocator's counters add up afterwards."""
import threading

import pytest
import torch

import aten_fpga
from runtime_support import exact

THREADS = 4


def run_threads(work):
    errors = []

    def guarded(i):
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001  (reported below, with its thread)
            errors.append((i, e))

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("level", [4, 3])
def test_shared_and_separate_tensors_from_four_threads(level):
    aten_fpga.load(level)
    try:
        n = 70_000  # above the multi-CU split threshold: each launch uses every CU
        a, b = torch.randn(n), torch.randn(n)
        shared_a, shared_b = a.to("fpga"), b.to("fpga")
        shared_a.add_(0)  # device newer: every thread's first read races to nothing
        own = [torch.full((n,), float(i)).to("fpga") for i in range(THREADS)]
        results = [None] * THREADS
        allocated = torch.fpga.memory_allocated()

        def work(i):
            acc = own[i]
            for step in range(60):
                r = (shared_a + shared_b) * (i + 1)      # shared inputs, fresh outputs
                acc.add_(r, alpha=0.5)                   # this thread's tensor, in place
                acc.mul_(shared_b[:1].expand(n) * 0 + 1)  # broadcast view of a shared tensor
                if step % 20 == 0:
                    acc.copy_(acc.sinc() * 10)           # a fallback op, through the host
            results[i] = (r, acc)

        run_threads(work)
        for i, (r, acc) in enumerate(results):
            expected_r = (a + b) * (i + 1)
            expected = torch.full((n,), float(i))
            for step in range(60):
                expected.add_(expected_r, alpha=0.5)
                expected.mul_(b[:1].expand(n) * 0 + 1)
                if step % 20 == 0:
                    expected.copy_(expected.sinc() * 10)
            exact(r, expected_r)
            exact(acc, expected)
        exact(shared_a, a)
        del results, r, acc
        assert torch.fpga.memory_allocated() == allocated  # every thread's temporaries came back
    finally:
        aten_fpga.load(4)


def test_allocations_from_four_threads_keep_the_counters_consistent():
    torch.fpga.empty_cache()
    allocated = torch.fpga.memory_allocated()
    before = torch.fpga.memory_stats()

    def work(i):
        for step in range(500):
            t = torch.empty(100 * (1 + (step + i) % 7), device="fpga")  # 7 size classes, shared
            del t

    run_threads(work)
    after = torch.fpga.memory_stats()
    assert torch.fpga.memory_allocated() == allocated
    assert after["allocation.all.allocated"] - before["allocation.all.allocated"] == THREADS * 500
    assert after["allocation.all.freed"] - before["allocation.all.freed"] == THREADS * 500
    # Reuse worked across threads: at most one buffer per class and thread was ever made.
    assert after["segment.all.allocated"] - before["segment.all.allocated"] <= 7 * THREADS
