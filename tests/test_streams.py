"""Streams and events of the fpga device (host/ps/guard.cpp, aten_fpga/device.py): torch.fpga.Stream
/ Event / current_stream / stream(), and PyTorch's device-generic torch.Stream, torch.Event and
torch.accelerator on "fpga". Every launch completes before its op returns, so work on any stream
is ordered by the host's order; these tests check the API and that work issued under streams and
events computes what the CPU does."""
from __future__ import annotations

import time

import pytest
import torch

import aten_fpga
from runtime_support import exact, op_report


def test_streams_are_made_through_torch_stream_and_torch_fpga_stream():
    s = torch.Stream(device="fpga")
    assert s.device.type == "fpga" and s.device_index == torch.fpga.current_device()
    f = torch.fpga.Stream()
    assert isinstance(f, torch.Stream) and f.device.type == "fpga"
    assert f != s and f.stream_id != s.stream_id != 0
    assert torch.fpga.default_stream().stream_id == 0
    assert torch.fpga.current_stream() == torch.fpga.default_stream()


def test_the_current_stream_follows_the_context_and_torch_accelerator():
    s = torch.fpga.Stream()
    with torch.fpga.stream(s):
        assert torch.fpga.current_stream() == s
        assert torch.accelerator.current_stream() == s
        inner = torch.fpga.Stream()
        with torch.fpga.stream(inner):
            assert torch.fpga.current_stream() == inner
        assert torch.fpga.current_stream() == s
    assert torch.fpga.current_stream() == torch.fpga.default_stream()
    torch.accelerator.set_stream(s)
    assert torch.fpga.current_stream() == s
    torch.fpga.set_stream(torch.fpga.default_stream())
    assert torch.accelerator.current_accelerator().type == "fpga"


def test_work_across_streams_ordered_by_events_matches_the_cpu(fresh_stats):
    a = torch.randn(200_000)
    x = a.to("fpga")
    producer, consumer = torch.fpga.Stream(), torch.fpga.Stream()
    with torch.fpga.stream(producer):
        y = torch.neg(torch.neg(x)) * 3
        done = producer.record_event()
    consumer.wait_event(done)
    with torch.fpga.stream(consumer):
        z = y + x
        y.record_stream(consumer)  # y is used on another stream than the one that made it
    consumer.wait_stream(producer)
    consumer.synchronize()
    assert done.query() and consumer.query() and producer.query()
    assert op_report("neg.out")["fpga"] == 2 and op_report("add.out")["fpga"] == 1
    assert aten_fpga.stats().get("record_stream", {}).get("cpu_fallback", 0) == 0
    exact(z, a * 3 + a)


def test_timing_events_measure_the_work_between_them():
    x = torch.randn(1 << 22).to("fpga")
    start, end = torch.fpga.Event(enable_timing=True), torch.fpga.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(5):
        x = torch.neg(x)
    end.record()
    end.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3
    elapsed = start.elapsed_time(end)
    assert 0 < elapsed <= wall_ms
    assert end.elapsed_time(start) == pytest.approx(-elapsed)
    generic = torch.Event(device="fpga", enable_timing=True)
    generic.record(torch.fpga.Stream())
    assert generic.query() and start.elapsed_time(generic) >= elapsed


def test_elapsed_time_needs_timing_events_that_were_recorded():
    plain, timed = torch.fpga.Event(), torch.fpga.Event(enable_timing=True)
    plain.record()
    timed.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        plain.elapsed_time(timed)
    with pytest.raises(ValueError, match="recorded"):
        torch.fpga.Event(enable_timing=True).elapsed_time(timed)


def test_backward_under_a_side_stream_matches_the_cpu():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model.load_state_dict(ref.state_dict())
    model.to("fpga")
    xb, yb = torch.randn(8, 16), torch.randn(8, 4)
    with torch.fpga.stream(torch.fpga.Stream()):
        loss = torch.nn.functional.mse_loss(model(xb.to("fpga")), yb.to("fpga"))
        loss.backward()
    torch.fpga.synchronize()
    torch.nn.functional.mse_loss(ref(xb), yb).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad)
