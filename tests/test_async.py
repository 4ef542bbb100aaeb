"""Asynchronous execution (host/ps/queue.cpp, device.h, docs/runtime.md): a launch is queued on its
stream and the host returns at once; the host waits only where it must (a copy to the CPU, .item(),
a fallback, torch.fpga.synchronize(), an event); a queued kernel's error is raised at the next
synchronization, or at the launch under ATEN_FPGA_LAUNCH_BLOCKING=1.

Overlap and order are read from the device trace (aten_fpga._C.device_trace: each launch's and
device-side copy's interval on the device's steady clock), not from timing the host."""
from __future__ import annotations

import time

import pytest
import torch

import aten_fpga
from aten_fpga import _C
from runtime_support import exact, last_json, op_report, run_python

BIG = 1 << 23  # elements: a neg of 32 MiB takes milliseconds, a launch's host side microseconds


@pytest.fixture
def trace():
    """The device trace of the test's work: call it to synchronize and read the entries."""
    torch.fpga.synchronize()
    _C.device_trace()  # drop earlier entries
    _C.set_device_trace(True)
    yield lambda: [dict(zip(("stream", "kind", "name", "start", "end"), e)) for e in _C.device_trace()]
    _C.set_device_trace(False)


def kernels(entries, prefix="v_neg"):
    return [e for e in entries if e["kind"] == "k" and e["name"].startswith(prefix)]


def test_a_launch_returns_before_its_kernel_completes(trace, fresh_stats):
    # a GEMM of 768^3 runs for tens of milliseconds on the emulator; its launch takes microseconds
    a = torch.randn(768, 768)
    x = a.to("fpga")
    y = torch.mm(torch.neg(x), x)
    returned = time.monotonic_ns()  # the trace's clock (std::chrono::steady_clock)
    neg, gemm = [e for e in trace() if e["kind"] == "k"]
    assert neg["name"].startswith("v_neg") and gemm["name"].startswith("v_gemm")
    assert gemm["end"] > returned  # the host went on while the device ran
    assert neg["end"] <= gemm["start"]  # one stream: in order
    assert op_report("neg.out")["fpga"] == 1 and op_report("mm")["fpga"] == 1
    torch.testing.assert_close(y.cpu(), torch.mm(-a, a), rtol=1e-4, atol=1e-3)


def test_the_host_waits_where_it_reads_device_data(fresh_stats):
    a = torch.randn(BIG)
    x = torch.neg(a.to("fpga"))
    # .item(), a copy to the CPU, and a CPU fallback read the queued kernel's result
    assert torch.neg(x)[123].item() == a[123].item()
    exact(torch.neg(x), a)
    s = torch.neg(torch.neg(x))[:1000].abs() + 1
    torch.testing.assert_close(torch.lgamma(s).cpu(), torch.lgamma(a[:1000].abs() + 1), rtol=0, atol=0)
    assert op_report("lgamma.out")["cpu_fallback"] == 1 and op_report("abs.out")["fpga"] == 1


def test_a_freed_block_is_not_reused_while_a_queued_kernel_reads_it(fresh_stats):
    # The neg on the side stream still reads x's block when x is freed and the host writes a new
    # tensor of the same size class into the block on the default stream.
    a, b = torch.randn(BIG), torch.randn(BIG)
    side = torch.fpga.Stream()
    x = torch.neg(a.to("fpga"))
    m = torch.randn(768, 768).to("fpga")
    side.wait_stream(torch.fpga.current_stream())
    with torch.fpga.stream(side):
        busy = torch.mm(m, m)  # tens of milliseconds ahead of the neg on its stream
        y = torch.neg(x)
        x.record_stream(side)
    del x
    w = b.to("fpga")  # a host write; the neg below moves it to the device copy
    z = torch.neg(w)
    torch.fpga.synchronize()
    exact(y, a)
    exact(z, -b)
    del busy


def test_work_on_two_streams_ordered_by_an_event(trace, fresh_stats):
    a = torch.randn(BIG)
    x = a.to("fpga")
    producer, consumer = torch.fpga.Stream(), torch.fpga.Stream()
    with torch.fpga.stream(producer):
        y = torch.neg(torch.neg(x)) * 3
        done = torch.fpga.Event()
        done.record()
    with torch.fpga.stream(consumer):
        consumer.wait_event(done)
        z = torch.neg(y)
    entries = trace()
    made = [e for e in entries if e["stream"] == producer.stream_id and e["kind"] == "k"]
    used = [e for e in entries if e["stream"] == consumer.stream_id and e["kind"] == "k"]
    assert len(made) == 3 and len(used) == 1
    assert used[0]["start"] >= max(e["end"] for e in made)  # the event ordered them
    assert done.query()
    exact(z, a * -3)


def test_elapsed_time_is_the_device_time_between_the_events(trace):
    a = torch.randn(768, 768)
    x = a.to("fpga")
    start, end = torch.fpga.Event(enable_timing=True), torch.fpga.Event(enable_timing=True)
    start.record()
    y = torch.mm(torch.neg(x), x)
    end.record()
    issued = time.monotonic_ns()
    end.synchronize()
    ran = [e for e in trace() if e["kind"] == "k"]
    assert len(ran) == 2
    assert start.elapsed_time(end) * 1e6 >= ran[-1]["end"] - ran[0]["start"]  # both ran between the markers
    assert ran[-1]["end"] > issued  # while the host had long returned from recording `end`
    torch.testing.assert_close(y.cpu(), torch.mm(-a, a), rtol=1e-4, atol=1e-3)


def test_a_kernel_error_is_raised_at_the_next_synchronization(fresh_stats):
    a = torch.randn(1000)
    x = a.to("fpga")
    _C.inject_launch_fault("injected kernel failure")
    y = torch.neg(torch.neg(x))  # queued: no error yet
    with pytest.raises(RuntimeError, match=r"kernel v_neg\w* queued on stream 0 failed: injected kernel failure.*"
                                           r"ATEN_FPGA_LAUNCH_BLOCKING=1"):
        torch.fpga.synchronize()
    torch.fpga.synchronize()  # raised once: the device goes on
    exact(torch.neg(x), -a)
    _C.inject_launch_fault("injected again")
    y = torch.neg(x)
    with pytest.raises(RuntimeError, match="injected again"):
        y.cpu()  # a copy to the host is a synchronization too


def test_launch_blocking_raises_at_the_launch_and_waits_for_each_kernel():
    r = run_python("""
        import json, time, torch, aten_fpga
        from aten_fpga import _C
        x = torch.randn(1 << 23).to("fpga")
        torch.fpga.synchronize()
        _C.set_device_trace(True)
        y = torch.neg(x)
        returned = time.monotonic_ns()
        (k,) = [e for e in _C.device_trace() if e[1] == "k"]
        _C.inject_launch_fault("blocking failure")
        try:
            torch.neg(x)
            raised = ""
        except RuntimeError as e:
            raised = str(e)
        print(json.dumps({"blocking": _C.launch_blocking(), "ended_before_return": k[4] <= returned,
                          "raised": raised}))
    """, ATEN_FPGA_LAUNCH_BLOCKING=1)
    out = last_json(r)
    assert out["blocking"] and out["ended_before_return"]
    assert "blocking failure" in out["raised"] and "v_neg" in out["raised"]


def test_an_op_that_throws_after_launching_still_books_its_launches():
    # Under LAUNCH_BLOCKING the second of a full sum's two launches raises inside the op, after its
    # first launch: that launch is booked to the op (not left pending on the thread, naming a kernel
    # of an image that a later load replaces), and later ops and error paths run as usual.
    r = run_python("""
        import json, torch, aten_fpga
        from aten_fpga import _C
        a = torch.randn(64, 1000)
        x = a.to("fpga")
        torch.fpga.synchronize()
        aten_fpga.reset_stats()
        _C.inject_launch_fault("second launch fails", after=1)
        try:
            x.sum()
            raised = ""
        except RuntimeError as e:
            raised = str(e)
        row = aten_fpga.report()["sum.IntList_out"]
        aten_fpga.load(4)
        _C.inject_launch_fault("fails again", after=1)
        try:
            x.sum()
        except RuntimeError:
            pass
        ok = torch.allclose(torch.neg(x).sum().cpu(), -a.sum())
        print(json.dumps({"raised": raised, "launches": row["launches"], "runs": row["fpga"], "ok": ok}))
    """, ATEN_FPGA_LAUNCH_BLOCKING=1)
    out = last_json(r)
    assert "second launch fails" in out["raised"], out
    assert (out["launches"], out["runs"], out["ok"]) == (1, 0, True), out


def test_a_pinned_non_blocking_copy_overlaps_a_kernel_on_another_stream(trace):
    a = torch.randn(768, 768)
    x = a.to("fpga")
    h = torch.randn(BIG).pin_memory()
    d = torch.empty(BIG, device="fpga")
    torch.fpga.synchronize()
    trace()
    compute, copy = torch.fpga.Stream(), torch.fpga.Stream()
    compute.wait_stream(torch.fpga.current_stream())
    with torch.fpga.stream(compute):
        y = torch.mm(torch.neg(x), x)  # tens of milliseconds
    with torch.fpga.stream(copy):
        d.copy_(h, non_blocking=True)
    # and on one stream, in order
    with torch.fpga.stream(compute):
        e = torch.empty(BIG, device="fpga")
        e.copy_(h, non_blocking=True)
    entries = trace()
    ks = [k for k in entries if k["kind"] == "k" and k["stream"] == compute.stream_id]
    copies = [c for c in entries if c["kind"] == "c"]
    (on_copy,) = [c for c in copies if c["stream"] == copy.stream_id]
    (on_compute,) = [c for c in copies if c["stream"] == compute.stream_id]
    assert on_copy["start"] < ks[-1]["end"] and ks[0]["start"] < on_copy["end"]  # they overlapped
    assert on_compute["start"] >= ks[-1]["end"]
    exact(d, h)
    exact(e, h)
    torch.testing.assert_close(y.cpu(), torch.mm(-a, a), rtol=1e-4, atol=1e-3)


def test_a_pinned_non_blocking_copy_to_the_host_is_read_after_a_synchronization():
    a = torch.randn(BIG)
    y = torch.neg(torch.neg(a.to("fpga")))
    out = torch.empty(BIG).pin_memory()
    out.copy_(y, non_blocking=True)
    torch.fpga.current_stream().synchronize()
    torch.testing.assert_close(out, a, rtol=0, atol=0)


def test_stats_and_cu_activity_count_every_queued_launch(fresh_stats):
    before = sum(c["runs"] for c in _C.cu_activity())
    x = torch.randn(1000).to("fpga")
    for _ in range(20):
        x = torch.neg(x)
    # read without any other synchronization: both wait for the queued launches
    assert aten_fpga.stats()["neg.out"]["fpga"] == 20
    assert aten_fpga.report()["neg.out"]["launches"] == 20
    assert sum(c["runs"] for c in _C.cu_activity()) - before == 20


def test_an_ops_seconds_include_its_kernels_device_time(trace):
    x = torch.neg(torch.randn(BIG).to("fpga"))  # device-resident: the ops below move nothing
    trace()
    aten_fpga.reset_stats()
    y = torch.neg(torch.neg(torch.neg(x)))
    ran = kernels(trace())
    assert len(ran) == 3
    # the host's time in the three ops is microseconds; the launches' device time is booked to
    # them as they complete
    assert aten_fpga.report()["neg.out"]["fpga_seconds"] * 1e9 >= 0.99 * sum(k["end"] - k["start"] for k in ran)
    exact(y, -x.cpu())


SANITIZER_RACE = """
    import json, torch, aten_fpga
    a = torch.randn(1 << 20)
    x = a.to("fpga")
    producer, consumer = torch.fpga.Stream(), torch.fpga.Stream()
    with torch.fpga.stream(producer):
        y = torch.neg(torch.neg(x))
    out = {}
    with torch.fpga.stream(consumer):
        if "{order}" == "event":
            consumer.wait_stream(producer)
        elif "{order}" == "host":
            producer.synchronize()
        try:
            z = torch.neg(y)
            out["ok"] = torch.equal(z.cpu(), -a)
        except RuntimeError as e:
            out["error"] = str(e)
    print(json.dumps(out))
"""


@pytest.mark.parametrize("order", ["none", "event", "host"])
def test_the_sanitizer_catches_a_read_that_skipped_a_synchronization(order):
    out = last_json(run_python(SANITIZER_RACE.replace("{order}", order), ATEN_FPGA_SANITIZE=1))
    if order == "none":
        assert "coherence sanitizer" in out["error"] and "wait_stream" in out["error"], out
    else:
        assert out == {"ok": True}


def test_a_multi_tensor_kernel_keeps_every_tensor_of_its_lists_in_use(fresh_stats):
    # A _foreach_ kernel reaches the tensors of a list through the first one's address: the block
    # of a later one, freed and written by the host while the kernel is queued, must wait for it.
    a = [torch.randn(BIG // 4) for _ in range(3)]
    b = [torch.randn(BIG // 4) for _ in range(3)]
    xs = [torch.neg(t.to("fpga")) for t in a]
    ys = [torch.neg(t.to("fpga")) for t in b]
    m = torch.randn(768, 768).to("fpga")
    torch.fpga.synchronize()
    busy = torch.mm(m, m)  # tens of milliseconds, ahead of the foreach on the stream
    torch._foreach_add_(xs, ys)  # queued
    del ys[2]  # its block goes back to the cache ...
    w = torch.neg(torch.ones(BIG // 4).to("fpga"))  # ... and takes the host's bytes for this neg
    for x, p, q in zip(xs, a, b):
        exact(x, -p + -q)
    exact(w, -torch.ones(BIG // 4))
    assert op_report("_foreach_add_.List")["fpga"] == 1
    del busy
