"""Several devices: ATEN_FPGA_EMU_DEVICES=N gives fpga:0..N-1, each with its own memory, kernels
and caching allocator; copies between them run device to device; the device guard routes ops."""
import aten_fpga
from runtime_support import last_json, run_python


def test_two_devices_copies_and_guarded_ops():
    out = last_json(run_python("""
        import json, torch, aten_fpga
        r = {"count": torch.fpga.device_count()}
        a, b = torch.randn(50_000), torch.randn(50_000)
        x0 = a.to("fpga:0") + b.to("fpga:0")            # valid only on fpga:0's device copy
        aten_fpga.reset_stats()
        x1 = x0.to("fpga:1")                             # device to device
        r["copy"] = aten_fpga.report()["_copy_from"]
        r["x1"] = [str(x1.device), torch.equal(x1.cpu(), a + b)]
        with torch.fpga.device(1):
            y = x1 * x1                                  # runs on fpga:1
            e = torch.empty(3, device="fpga")            # "fpga" means the current device
            r["inner_current"] = torch.fpga.current_device()
        r["outer_current"] = torch.fpga.current_device()
        r["y"] = [str(y.device), str(e.device), torch.equal(y.cpu(), (a + b) * (a + b))]
        r["runs"] = [sum(c["runs"] for c in aten_fpga._C.cu_activity(i)) for i in (0, 1)]
        r["cus"] = aten_fpga._C.kernel_cus("v_mul_float32")
        torch.fpga.set_device(1)
        z = torch.ones(4, device="fpga") + 1
        r["set_device"] = [str(z.device), z.cpu().tolist()]
        torch.fpga.set_device(0)
        r["mem"] = [torch.fpga.memory_allocated(i) for i in (0, 1)]
        back = y.to("fpga:0").to("cpu")                  # and back again
        r["back"] = torch.equal(back, (a + b) * (a + b))
        try:
            x0 + x1
        except RuntimeError as err:
            r["mixed"] = str(err).splitlines()[0]
        try:
            torch.empty(1, device="fpga:2")
        except RuntimeError as err:
            r["bad_index"] = str(err).splitlines()[0]
        print(json.dumps(r))
    """, ATEN_FPGA_EMU_DEVICES=2))
    assert out["count"] == 2
    # fpga:0 -> fpga:1 is staged through the host, as between two cards without peer-to-peer DMA:
    # fpga:0's bytes come back once (counted), fpga:1's host shadow is written (synced when used).
    assert out["copy"]["bytes_to_host"] == 200_000 and out["copy"]["bytes_to_device"] == 0
    assert out["x1"] == ["fpga:1", True]
    assert out["inner_current"] == 1 and out["outer_current"] == 0
    assert out["y"] == ["fpga:1", "fpga:1", True]
    # The add on fpga:0, the mul on fpga:1: one launch each, split over the image's CUs (each CU
    # gets 16384 elements at least).
    split = min(out["cus"], 50_000 // 16384)
    assert out["runs"] == [split, split]
    assert out["set_device"] == ["fpga:1", [2.0] * 4]
    assert out["mem"][0] > 0 and out["mem"][1] > 0
    assert out["back"]
    assert "fpga:0 and fpga:1" in out["mixed"]
    assert "invalid fpga device index 2: there are 2 fpga devices" in out["bad_index"]


def test_device_kind_is_chosen_by_env_and_bad_values_are_named():
    assert aten_fpga._C.device_kind() == "emu"
    r = run_python("import torch, aten_fpga", ATEN_FPGA_DEVICE="gpu")
    assert r.returncode != 0
    assert "ATEN_FPGA_DEVICE='gpu': expected emu (the emulated device) or xrt (a card through XRT)" in r.stderr
