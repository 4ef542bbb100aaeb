"""The memory model: an fpga tensor's bytes live in a host shadow and a device copy, and each
allocation knows which side is current. Every test here fails if a sync is skipped or done in the
wrong direction -- FPGA ops, CPU-fallback ops, copies and reads on views of one storage, mixed."""
import io
import random

import pytest
import torch

import aten_fpga
from runtime_support import exact


def test_fpga_op_writing_part_of_a_host_newer_storage():
    a, p, q = torch.randn(1000), torch.randn(100), torch.randn(100)
    x = a.to("fpga")  # only the host shadow holds a
    torch.add(p.to("fpga"), q.to("fpga"), out=x[100:200])  # the kernel writes 100 of 1000 elements
    expected = a.clone()
    expected[100:200] = p + q
    exact(x[::7], expected[::7])  # a strided view read first
    exact(x, expected)


def test_fallback_writing_part_of_a_device_newer_storage_then_fpga_again():
    a = torch.randn(64, 64)
    x = a.to("fpga")
    x.add_(1)                  # device newer
    x[5:9].fill_(3.5)          # fallback into a view: must fetch the rest first
    x[:, 3].neg_()             # fallback into a strided view
    x.mul_(x[0].clone())       # FPGA (the clone too): must send the host's writes to the device
    expected = a + 1
    expected[5:9] = 3.5
    expected[:, 3].neg_()
    expected.mul_(expected[0].clone())
    exact(x.t()[2:], expected.t()[2:])
    exact(x, expected)


def test_views_of_other_shapes_see_each_others_writes():
    a, b = torch.randn(1200), torch.randn(1200)
    x = a.to("fpga")
    grid = x.view(30, 40)
    x.add_(b.to("fpga"))                 # FPGA on the flat view
    col = grid[:, 7].sinc()              # fallback reads a column of the 2-D view
    grid[2].mul_(col[:1].expand(40))     # FPGA writes a row through the 2-D view
    expected = (a + b).view(30, 40).clone()
    col_expected = expected[:, 7].sinc()
    expected[2].mul_(col_expected[:1].expand(40))
    exact(col, col_expected)
    assert x[85].item() == expected.flatten()[85].item()
    exact(x, expected.flatten())


def test_resize_keeps_bytes_from_whichever_side_is_current():
    a = torch.randn(1000)
    x = a.to("fpga")
    x.add_(2)                # device newer
    x.resize_(5000)          # grows: the bytes move device to device
    exact(x[:1000], a + 2)
    y = a.to("fpga")         # host newer
    y.resize_(3000)
    exact(y[:1000], a)
    z = (a.to("fpga") * 3)
    z.resize_(0)
    z.resize_(1000)          # shrinking keeps the storage: the bytes are still there
    exact(z, a * 3)


def test_item_print_and_numpy_conversion_after_a_kernel():
    a = torch.tensor([1.5, -2.0, 3.25])
    x = a.to("fpga") * a.to("fpga")
    assert x[2].item() == 3.25 * 3.25
    assert "10.5625" in str(x)
    assert x.cpu().numpy().tolist() == (a * a).tolist()


def test_saving_views_of_a_device_newer_storage():
    a = torch.randn(100)
    x = a.to("fpga")
    x.mul_(2)
    buf = io.BytesIO()
    torch.save(x[50:], buf)
    buf.seek(0)
    torch.testing.assert_close(torch.load(buf, map_location="cpu"), (a * 2)[50:], rtol=0, atol=0)


def test_cross_device_copy_of_a_fresh_in_place_result():
    a, b = torch.randn(300), torch.randn(300)
    x = a.to("fpga")
    x.add_(b.to("fpga"))
    y = x.clone()            # fpga -> fpga copy (device to device)
    z = x.to(torch.float64)  # fpga -> fpga with a cast
    x.zero_()                # the copies must not alias x
    exact(y, a + b)
    exact(z, (a + b).to(torch.float64))
    exact(x, torch.zeros(300))


# A random program over one storage, run on fpga and mirrored on the CPU: FPGA kernels (in place,
# out=, on views), CPU-fallback ops on views, copies in from the CPU, reads of views. Any skipped
# or misdirected sync makes a read differ from the mirror.
VIEWS = [lambda t: t, lambda t: t[3:], lambda t: t[::2], lambda t: t.view(16, 32)[:, 5],
         lambda t: t.view(16, 32)[2:9].t(), lambda t: t[100:200], lambda t: t.view(32, 16)[::3, 1::4]]


def random_step(rng, x, mirror, other):
    v = rng.randrange(len(VIEWS))
    xv, mv = VIEWS[v](x), VIEWS[v](mirror)
    kind = rng.randrange(7)
    if kind == 0:    # FPGA, in place, with another fpga tensor broadcast in
        xv.add_(other[: xv.shape[-1]], alpha=0.5)
        mv.add_(other.cpu()[: mv.shape[-1]], alpha=0.5)
    elif kind == 1:  # FPGA, in place, with a Python scalar
        xv.mul_(0.75)
        mv.mul_(0.75)
    elif kind == 2:  # FPGA, out= a view
        torch.add(xv, 1.0, out=xv)
        torch.add(mv, 1.0, out=mv)
    elif kind == 3:  # CPU fallback, in place on a view (sinc has no FPGA kernel)
        xv.sinc_()
        mv.sinc_()
    elif kind == 4:  # copy from the CPU into a view
        src = torch.randn(mv.shape, generator=torch.Generator().manual_seed(rng.randrange(1 << 30)))
        xv.copy_(src)
        mv.copy_(src)
    elif kind == 5:  # read a view
        exact(xv, mv.clone())
    else:            # FPGA ops (mul, then the sum reduction) whose result is read back
        r = (xv * xv).sum()
        torch.testing.assert_close(r.cpu(), (mv * mv).sum())  # a reduction: summed in another order


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_on_views_of_one_storage(seed):
    rng = random.Random(seed)
    mirror = torch.randn(512, generator=torch.Generator().manual_seed(seed))
    x = mirror.to("fpga")
    other = torch.randn(512).to("fpga")
    other.add_(0)  # device newer too
    for _ in range(120):
        random_step(rng, x, mirror, other)
    exact(x, mirror)
