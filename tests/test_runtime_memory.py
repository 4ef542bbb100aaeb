"""Device memory: the caching allocator (blocks reused by size class, per device), its counters
(torch.fpga.memory_allocated, max_memory_allocated, reset_peak_memory_stats, memory_stats,
empty_cache), out-of-memory handling, and no leak over many small ops."""
import gc
import resource

import torch

import aten_fpga
from runtime_support import exact, last_json, run_python

MiB = 1 << 20


def stat(key):
    return torch.fpga.memory_stats()[key]


def test_allocated_counts_whole_blocks_and_tracks_peak():
    torch.fpga.empty_cache()
    base = torch.fpga.memory_allocated()
    torch.fpga.reset_peak_memory_stats()
    assert torch.fpga.max_memory_allocated() == base
    x = torch.empty(1000, device="fpga")  # 4000 bytes: a 4096-byte block
    assert torch.fpga.memory_allocated() == base + 4096
    assert stat("requested_bytes.all.current") >= 4000
    y = torch.empty(3 * MiB // 4, device="fpga")  # 3 MiB: a large block, in 2 MiB steps -> 4 MiB
    assert torch.fpga.memory_allocated() == base + 4096 + 4 * MiB
    del y
    assert torch.fpga.memory_allocated() == base + 4096
    assert torch.fpga.max_memory_allocated() == base + 4096 + 4 * MiB
    torch.fpga.reset_peak_memory_stats()
    assert torch.fpga.max_memory_allocated() == base + 4096
    del x
    assert torch.fpga.memory_allocated() == base


def test_freed_blocks_are_reused_by_size_class():
    torch.fpga.empty_cache()
    x = torch.empty(5000, device="fpga")  # 20000 bytes -> a 20480-byte block
    ptr = x.data_ptr()
    segments, hits = stat("segment.all.allocated"), stat("num_cache_hits")
    del x
    assert torch.fpga.memory_reserved() >= 20480  # kept, cached
    y = torch.empty(5100, device="fpga")  # 20400 bytes: the same class
    assert y.data_ptr() == ptr
    assert stat("segment.all.allocated") == segments and stat("num_cache_hits") == hits + 1
    z = torch.empty(6000, device="fpga")  # another class: a new device buffer
    assert stat("segment.all.allocated") == segments + 1
    del y, z


def test_reused_block_holds_no_stale_coherence_state():
    # A block freed while only its device copy was valid, reused for a tensor written on the host.
    a = torch.randn(4096)
    x = a.to("fpga")
    x.add_(1)  # device copy newer
    del x
    b = torch.randn(4096)
    y = b.to("fpga")  # same class: the same block
    exact(y, b)
    exact(y * 2, b * 2)


def test_empty_cache_returns_cached_blocks():
    x = torch.empty(MiB, device="fpga")
    del x
    assert torch.fpga.memory_reserved() > torch.fpga.memory_allocated()
    torch.fpga.empty_cache()
    assert torch.fpga.memory_reserved() == torch.fpga.memory_allocated()


def test_out_of_memory_frees_the_cache_retries_and_leaves_the_device_usable():
    r = run_python("""
        import json, torch, aten_fpga
        MiB = 1 << 20
        out = {}
        x = torch.empty(40 * MiB // 4, device="fpga")
        del x                                        # 40 MiB cached
        y = torch.empty(48 * MiB // 4, device="fpga")  # fits only once the cache is freed
        out["retries"] = torch.fpga.memory_stats()["num_alloc_retries"]
        try:
            torch.empty(100 * MiB // 4, device="fpga")
        except torch.OutOfMemoryError as e:
            out["message"] = str(e).splitlines()[0]
        a = torch.ones(10 * MiB // 4, device="fpga")
        try:
            a + a  # the output does not fit: the op fails, its inputs are intact
        except torch.fpga.OutOfMemoryError:
            out["op_oom"] = True
        del y
        out["after"] = (a + a)[-3:].cpu().tolist()  # usable again
        out["ooms"] = torch.fpga.memory_stats()["num_ooms"]
        out["allocated"] = torch.fpga.memory_allocated()
        print(json.dumps(out))
    """, ATEN_FPGA_EMU_MEMORY=64 << 20)
    out = last_json(r)
    assert out["retries"] == 1
    msg = out["message"]
    assert "fpga:0 out of memory: tried to allocate 100.00 MiB" in msg
    assert "hold 48.00 MiB" in msg and "of its 64.00 MiB" in msg and "ATEN_FPGA_EMU_MEMORY" in msg
    assert out["op_oom"] and out["after"] == [2.0, 2.0, 2.0] and out["ooms"] == 2
    assert out["allocated"] == 10 * MiB


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def test_memory_stays_flat_over_100k_small_ops():
    a, b = torch.randn(64), torch.randn(64)
    x, y = a.to("fpga"), b.to("fpga")
    out = torch.empty(64, device="fpga")

    def step(i):
        z = x + y                  # new output each time: allocator churn
        w = z * 2.0                # a scalar broadcast buffer
        torch.add(w, y, out=out)   # out=
        out.mul_(0.5)              # in place
        if i % 1000 == 0:
            out[:5].exp().cpu()    # a fallback on a view, and a sync to the host

    for i in range(2000):  # warm up: caches and free lists reach their steady state
        step(i)
    gc.collect()
    allocated, reserved, rss = torch.fpga.memory_allocated(), torch.fpga.memory_reserved(), _rss_bytes()
    for i in range(100_000 // 4):  # 4 FPGA ops per step
        step(i)
    gc.collect()
    assert torch.fpga.memory_allocated() == allocated
    assert torch.fpga.memory_reserved() == reserved
    assert _rss_bytes() - rss < 8 * MiB
    exact(out, (torch.add((a + b) * 2.0, b)) * 0.5)
