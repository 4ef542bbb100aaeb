"""The device itself: fallback, printing, .item(), memory coherence, images, autoload."""
import os
import subprocess
import sys

import pytest
import torch

import aten_fpga


def test_lgamma_runs_through_counted_fallback():
    aten_fpga.reset_stats()
    x = torch.randn(100)
    y = torch.lgamma(x.to("fpga"))  # not in the table
    assert y.device.type == "fpga"
    torch.testing.assert_close(y.cpu(), torch.lgamma(x), rtol=0, atol=0)
    assert aten_fpga.stats()["lgamma.out"] == {"fpga": 0, "cpu_fallback": 1}


def test_print_and_item():
    x = torch.tensor([1.5, -2.0, 3.25]).to("fpga")
    text = str(x + x)
    assert "device='fpga:0'" in text and "3." in text and "-4." in text and "6.5" in text
    assert (x * x)[2].item() == 3.25 * 3.25


def test_sync_after_fpga_op_then_fallback_on_views():
    # The FPGA op leaves the result valid only on the device; a fallback op on a view of the same
    # storage and .cpu() of another view must both see it (and each other's writes).
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    x = a.to("fpga")
    x.add_(b.to("fpga"))  # device copy newer
    x[0].lgamma_()  # fallback (no kernel) on a view: must sync to host first, then mark host newer
    x[1:].mul_(torch.full((7, 8), 2.0).to("fpga"))  # FPGA op on another view: must sync to device
    expected = a + b
    expected[0].lgamma_()
    expected[1:] *= 2
    torch.testing.assert_close(x[:, :4].cpu(), expected[:, :4], rtol=0, atol=0)
    torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=0)


def test_device_module():
    assert torch.fpga.is_available() and torch.fpga.device_count() >= 1
    assert torch.fpga.current_device() == 0
    with torch.fpga.device(0):
        assert torch.fpga.current_device() == 0
    torch.fpga.synchronize()
    t = torch.ones(2, device="fpga")
    assert t.is_fpga and t.device == torch.device("fpga", 0)


def test_load_missing_image_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="scons"):
        aten_fpga.load(str(tmp_path / "nothing.so"))
    assert aten_fpga.image().endswith("torch_emu.so")


def _python(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def test_plain_import_torch_autoloads_the_backend():
    r = _python("import torch; x = torch.ones(3, device='fpga'); print((x + x).cpu().tolist())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[2.0, 2.0, 2.0]"


def test_autoload_never_breaks_import_torch(tmp_path):
    r = _python("import torch; print(torch.ones(1).item())", ATEN_FPGA_BUILD=str(tmp_path))
    assert r.returncode == 0 and r.stdout.strip() == "1.0", r.stderr
    assert "aten_fpga was not loaded" in r.stderr and "scons" in r.stderr


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_image_env_var_selects_level(level):
    r = _python("import torch, aten_fpga; x = torch.ones(5, device='fpga'); y = x + x; "
                "print(aten_fpga.image()); print(aten_fpga.stats()['add.out'])", ATEN_FPGA_IMAGE=str(level))
    assert r.returncode == 0, r.stderr
    path, stats = r.stdout.strip().splitlines()
    assert path.endswith(f"opt{level}/torch_emu.so")
    assert stats == "{'fpga': 1, 'cpu_fallback': 0}"


def test_multi_cu_image_reports_its_cus():
    aten_fpga.load(3)
    try:
        assert aten_fpga._C.kernel_cus("v_add_float32") == 2  # the binary engine at XCL_OPT 3: Platform.stream_cus
        a, b = torch.randn(1 << 18), torch.randn(1 << 18)
        torch.testing.assert_close((a.to("fpga") + b.to("fpga")).cpu(), a + b, rtol=0, atol=0)
    finally:
        aten_fpga.load(4)
