"""Transfers between host and device, and pinned host memory (host/ps/pinned.*, host/ps/copy.cpp).

A dense copy of one dtype moves bytes straight between the device copy and the CPU tensor: a read
of device-newer bytes leaves the host shadow as it was (so every read is a transfer, as on a card),
and a copy from pinned memory writes the device copy (a DMA) instead of the host shadow, so the
kernel that reads it next moves nothing. Every value is checked against the CPU."""
from __future__ import annotations

import pytest
import torch

import aten_fpga
from runtime_support import exact, op_report

WORD = 64  # host/ps/allocator.h kWordBytes: transfers are booked in whole port words


def on_device(cpu: torch.Tensor) -> torch.Tensor:
    """`cpu` on the fpga, written by kernels: only the device copy holds it."""
    return torch.neg(torch.neg(cpu.to("fpga")))


# --- reading device memory into CPU tensors ----------------------------------------------------

def test_cpu_of_a_device_tensor_reads_device_memory_each_time(fresh_stats):
    a = torch.randn(100_000)
    x = on_device(a)
    aten_fpga.reset_stats()
    torch.testing.assert_close(x.cpu(), a, rtol=0, atol=0)
    assert op_report("_copy_from")["bytes_to_host"] == a.nbytes
    # The host shadow was not made current: a second read is a second transfer.
    torch.testing.assert_close(x.cpu(), a, rtol=0, atol=0)
    assert op_report("_copy_from")["bytes_to_host"] == 2 * a.nbytes


def test_a_read_across_host_newer_and_device_newer_bytes_takes_each_from_its_side(fresh_stats):
    a, p, q = torch.randn(50_000), torch.randn(100), torch.randn(7)
    x = on_device(a)
    x[1000:1100] = p  # dense CPU writes: these bytes are newer in the host shadow
    x[30_003:30_010] = q
    expected = a.clone()
    expected[1000:1100] = p
    expected[30_003:30_010] = q
    aten_fpga.reset_stats()
    out = torch.empty(40_000)
    out.copy_(x[500:40_500])  # into an existing CPU tensor, from a view at an offset
    torch.testing.assert_close(out, expected[500:40_500], rtol=0, atol=0)
    # only the device-newer bytes crossed, in whole port words
    assert 0 < op_report("_copy_from")["bytes_to_host"] <= 40_000 * 4 - (100 + 7) * 4 + 4 * WORD
    exact(torch.neg(x), -expected)  # the device copy still holds the kernel's bytes, the CPU writes too


@pytest.mark.parametrize("case", ["transposed", "strided", "other dtype"])
def test_reads_that_are_not_byte_copies_still_match_the_cpu(case):
    a = torch.randn(300, 200)
    x = on_device(a)
    read = {"transposed": lambda t: t.t().contiguous() if t.device.type == "cpu" else t.t().cpu().contiguous(),
            "strided": lambda t: t[::3, 1::2].cpu(),
            "other dtype": lambda t: t.to("cpu", torch.float64)}[case]
    torch.testing.assert_close(read(x), read(a), rtol=0, atol=0)


# --- pinned memory ------------------------------------------------------------------------------

def test_pin_memory_and_pin_memory_true_give_pinned_tensors_with_the_same_values():
    a = torch.randn(1000)
    p = a.pin_memory()
    assert p.is_pinned() and not a.is_pinned() and p.device.type == "cpu"
    torch.testing.assert_close(p, a, rtol=0, atol=0)
    assert p[10:20].is_pinned()  # a view into the block
    e = torch.empty(3, 5, pin_memory=True)
    assert e.is_pinned() and e.shape == (3, 5)
    assert torch.randn(4).pin_memory().pin_memory().is_pinned()


def test_a_copy_from_pinned_memory_goes_to_the_device_and_the_kernel_moves_nothing(fresh_stats):
    a, b = torch.randn(100_000), torch.randn(100_000)
    x = a.pin_memory().to("fpga")
    y = b.to("fpga")  # pageable: into the host shadow, synced when a kernel reads it
    assert op_report("_copy_from")["bytes_to_device"] == a.nbytes
    aten_fpga.reset_stats()
    s = torch.neg(torch.neg(x))
    assert op_report("neg.out")["bytes_to_device"] == 0 and op_report("neg.out")["fpga"] == 2
    t = torch.neg(y)
    assert op_report("neg.out")["bytes_to_device"] == b.nbytes
    exact(s, a)
    exact(t, -b)
    exact(x + y, a + b)


def test_a_copy_into_pinned_memory_reads_the_device(fresh_stats):
    a = torch.randn(64, 1000)
    x = on_device(a)
    out = torch.empty(64, 1000, pin_memory=True)
    aten_fpga.reset_stats()
    out.copy_(x)
    torch.testing.assert_close(out, a, rtol=0, atol=0)
    assert op_report("_copy_from")["bytes_to_host"] == a.nbytes
    part = torch.empty(1000, pin_memory=True)
    part.copy_(torch.neg(x[7]))  # a row at an offset in a kernel's output
    torch.testing.assert_close(part, -a[7], rtol=0, atol=0)


def test_pinned_blocks_are_reused_and_released(fresh_stats):
    a = torch.randn(1 << 16)
    first = a.pin_memory()
    address = first.data_ptr()
    del first
    again = a.pin_memory()  # the freed block, from the cache
    assert again.data_ptr() == address
    torch.testing.assert_close(again.to("fpga").cpu(), a, rtol=0, atol=0)
    del again
    torch.fpga.empty_cache()
    assert not torch.empty(0).is_pinned()


def test_dataloader_pin_memory_yields_pinned_batches_that_train_on_the_device():
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=16, pin_memory=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    ref = torch.nn.Linear(8, 1)
    ref.load_state_dict(model.state_dict())
    model.to("fpga")
    for xb, yb in loader:
        assert xb.is_pinned() and yb.is_pinned()
        loss = torch.nn.functional.mse_loss(model(xb.to("fpga", non_blocking=True)), yb.to("fpga", non_blocking=True))
        loss.backward()
        ref_loss = torch.nn.functional.mse_loss(ref(xb), yb)
        ref_loss.backward()
        torch.testing.assert_close(loss.cpu(), ref_loss.detach())
    torch.testing.assert_close(model.weight.grad.cpu(), ref.weight.grad)
