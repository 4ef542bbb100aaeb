"""target=emu: the g++ image and the torch.xclbin that describes it -- its container layout, XRT's
own reading of it (when libxrt-dev is installed), incrementality, and the host discovering kernels
and CU counts from it. Builds run in a copy of the sources, never in the checkout's build/."""
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_vitis"))
from scons_repo import ROOT, make_repo, ok, scons, steps_run  # noqa: E402

import aten_fpga  # noqa: E402
from aten_fpga import _C  # noqa: E402
from aten_fpga._paths import emu_image_path  # noqa: E402

U250_DDR = ["DDR[0]", "DDR[1]", "DDR[2]", "DDR[3]"]
CUS = 3


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An opt=2 image with 3 CUs per kernel (not the default count, so reading it is observable)."""
    repo = make_repo(tmp_path_factory.mktemp("emu"))
    out = ok(scons(repo, "opt=2", f"cus={CUS}", "xclbin"))
    return repo, repo / "build/emu/opt2", out


def sections(data: bytes) -> dict[int, bytes]:
    """The sections of an xclbin, read with xclbin.h's layout written out independently here."""
    assert data[:8] == b"xclbin2\0"
    length, = struct.unpack_from("<Q", data, 304)
    count, = struct.unpack_from("<I", data, 304 + 144)
    assert length == len(data)
    out = {}
    for i in range(count):
        kind, _, offset, size = struct.unpack_from("<I16s4xQQ", data, 456 + 40 * i)
        out[kind] = data[offset:offset + size]
    return out


def expected_kernels(repo: Path) -> dict[str, list[str]]:
    """From codegen's manifest: each kernel of the table and its arguments in order."""
    manifest = json.loads((repo / "build/gen/kernels.json").read_text())
    return {name: k["args"] for name, k in manifest["kernels"].items()}


def test_image_and_container(built):
    repo, out, log = built
    assert (out / "torch_emu.so").exists() and (out / "report.json").exists()
    assert not (repo / "build/host").exists()  # `xclbin` alone never builds the host extension
    s = sections((out / "torch.xclbin").read_bytes())
    assert set(s) == {2, 6, 7, 8}  # EMBEDDED_METADATA, MEM_TOPOLOGY, CONNECTIVITY, IP_LAYOUT
    n, = struct.unpack_from("<i", s[8])
    names = [s[8][8 + 80 * i + 16: 8 + 80 * i + 80].rstrip(b"\0").decode() for i in range(n)]
    kernels = expected_kernels(repo)
    assert names == [f"{k}:{k}_{i}" for k in sorted(kernels) for i in range(1, CUS + 1)]
    xml = s[2].decode()
    assert '<emulation image="torch_emu.so"/>' in xml and xml.count("<instance ") == len(names)
    # codegen, one g++ unit per category, the image's entry points, the link
    total = len(list((repo / "build/gen/emu/opt2").glob("*.cpp"))) + 3
    assert [line.split()[0] for line in steps_run(log)] == [f"[{i}/{total}]" for i in range(1, total + 1)]


@pytest.mark.skipif(not Path("/usr/include/xrt/experimental/xrt_xclbin.h").exists(),
                    reason="XRT's headers are not installed: apt-get install libxrt-dev (ci/install.sh does)")
def test_xrt_reads_kernels_arguments_and_cus(built, tmp_path):
    repo, out, _ = built
    exe = tmp_path / "list_xclbin"
    subprocess.run(["g++", "-std=c++17", "-I/usr/include/xrt", str(ROOT / "tests/xrt/list_xclbin.cpp"), "-o", str(exe),
                    "-lxrt_coreutil", "-luuid", "-pthread"], check=True, capture_output=True, timeout=300)
    text = subprocess.run([str(exe), str(out / "torch.xclbin")], check=True, capture_output=True, text=True,
                          timeout=60).stdout
    lines = text.splitlines()
    assert lines[0] == "platform xilinx_u250_gen3x16_xdma_4_1_202210_1"
    listed, kernel = {}, None
    for line in lines[1:]:
        if line.startswith("kernel "):
            kernel = line.split()[1]
            listed[kernel] = {"args": [], "buffers": [], "cus": []}
        elif line.startswith("  arg "):
            listed[kernel]["args"].append(line.split()[2])
            if "*" in line.split("type=")[1].split()[0]:
                listed[kernel]["buffers"].append(line.split()[2])
        elif line.startswith("  cu "):
            listed[kernel]["cus"].append(line.split()[1:])
    kernels = expected_kernels(repo)
    assert {k: v["args"] for k, v in listed.items()} == kernels
    assert all(listed[k]["buffers"] for k in kernels)
    # Every CU, each of its buffers in its own bank, round-robin over the U250's four DDR banks.
    n = 0
    for k in sorted(kernels):
        cus = listed[k]["cus"]
        assert [c[0] for c in cus] == [f"{k}:{k}_{i}" for i in range(1, CUS + 1)]
        for cu in cus:
            buffers = listed[k]["buffers"]
            assert cu[1:] == [f"{a}={U250_DDR[(n + j) % 4]}" for j, a in enumerate(buffers)]
            n += len(buffers)
    assert "type=float* size=8 offset=16 port=M_AXI_GMEM0" in text  # opt=2: 32-bit ports


def test_second_build_runs_nothing_and_levels_build_beside_each_other(built):
    repo, out, _ = built
    again = ok(scons(repo, "opt=2", f"cus={CUS}", "xclbin"))
    assert "[" not in again and "is up to date" in again
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    mtimes = {p: p.stat().st_mtime_ns for p in before}
    ok(scons(repo, "opt=4", "xclbin"))
    assert (repo / "build/emu/opt4/torch.xclbin").exists()
    assert {p: p.read_bytes() for p in before} == before and {p: p.stat().st_mtime_ns for p in before} == mtimes


def test_host_discovers_kernels_and_cus_from_the_xclbin(built):
    repo, out, _ = built
    try:
        assert aten_fpga.load(str(out / "torch.xclbin")).endswith("torch.xclbin")
        assert {k: _C.kernel_cus(k, 0) for k in expected_kernels(repo)} == {k: CUS for k in expected_kernels(repo)}
        a, b = torch.randn(100_003), torch.randn(100_003)
        torch.testing.assert_close((a.to("fpga") * b.to("fpga")).cpu(), a * b, rtol=0, atol=0)
        # The g++ image's path loads the same way: through the xclbin beside it.
        aten_fpga.load(str(out / "torch_emu.so"))
        assert _C.kernel_cus("v_add_float32", 0) == CUS
    finally:
        aten_fpga.load(emu_image_path(4))


def _write(path: Path, kernels, emulation_image):
    sys.path.insert(0, str(ROOT / "site_scons"))
    from afpga import xclbin

    arg = xclbin.Arg("size", False, "S_AXI_CONTROL", 8, "uint64_t")
    ks = tuple(xclbin.Kernel(k, (xclbin.Port("S_AXI_CONTROL", False, 32),), (arg,), (f"{k}_1",)) for k in kernels)
    mem = (xclbin.Memory("DDR[0]", "DDR", 1 << 34, 0),)
    xclbin.write(str(path), xclbin.Design("xilinx_u250_gen3x16_xdma_4_1_202210_1", "hw", ks, mem, {}, emulation_image))


def test_bad_images_are_refused_with_the_cause(built, tmp_path):
    _, out, _ = built
    shutil.copy(out / "torch_emu.so", tmp_path / "torch_emu.so")
    try:
        _write(tmp_path / "card.xclbin", ["v_add_float32"], None)
        with pytest.raises(RuntimeError, match="runs on a card through XRT"):
            aten_fpga.load(str(tmp_path / "card.xclbin"))
        _write(tmp_path / "extra.xclbin", ["v_softmax_float32"], "torch_emu.so")
        with pytest.raises(RuntimeError, match="lists kernel v_softmax_float32 but .* lacks it.*rebuild"):
            aten_fpga.load(str(tmp_path / "extra.xclbin"))
        _write(tmp_path / "args.xclbin", ["v_add_float32"], "torch_emu.so")
        with pytest.raises(RuntimeError, match="v_add_float32 has 1 arguments .* but 5"):
            aten_fpga.load(str(tmp_path / "args.xclbin"))
        (tmp_path / "junk.xclbin").write_bytes(b"not an xclbin at all" * 40)
        with pytest.raises(RuntimeError, match="not a usable xclbin: it lacks the \"xclbin2\" magic"):
            aten_fpga.load(str(tmp_path / "junk.xclbin"))
        assert aten_fpga.image().endswith("torch_emu.so")  # a refused image leaves the loaded one
    finally:
        aten_fpga.load(emu_image_path(4))
