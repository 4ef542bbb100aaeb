"""target=emu: the g++ image and the torch.xclbin that describes it -- its container layout (the
engines, their CUs and the member table), XRT's own reading of it (when libxrt-dev is installed),
incrementality, and the host discovering the member kernels and their CU counts from it. Builds run
in a copy of the sources, never in the checkout's build/."""
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

CUS = 3
# The reduced table's image: one engine, e_binary, whose members are add and mul.
MEMBERS = """\
aten_fpga engines 1
engine e_binary opcode
member v_add_float32 e_binary 0 in1=in1 in2=in2 out=out alpha=alpha size=size
member v_mul_float32 e_binary 1 in1=in1 in2=in2 out=out size=size
"""


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
    """From codegen's manifest: each kernel of the table (an engine's member) and its arguments in order."""
    manifest = json.loads((repo / "build/gen/kernels.json").read_text())
    return {name: k["args"] for name, k in manifest["kernels"].items()}


def expected_engines(repo: Path) -> dict[str, list[str]]:
    """From codegen's interface file: each engine of the image and its arguments in order."""
    interface = json.loads((repo / "build/gen/interface_opt2.json").read_text())
    return {name: [a["name"] for a in interface["kernels"][name]["args"]] for name in interface["engines"]}


def test_image_and_container(built):
    repo, out, log = built
    assert (out / "torch_emu.so").exists() and (out / "report.json").exists()
    assert not (repo / "build/host").exists()  # `xclbin` alone never builds the host extension
    s = sections((out / "torch.xclbin").read_bytes())
    # EMBEDDED_METADATA, MEM_TOPOLOGY, CONNECTIVITY, IP_LAYOUT, USER_METADATA (the member table)
    assert set(s) == {2, 6, 7, 8, 16}
    assert s[16].decode() == MEMBERS == (repo / "build/gen/members_opt2.txt").read_text()
    assert expected_engines(repo) == {"e_binary": ["in1", "in2", "out", "opcode", "alpha", "size"]}
    n, = struct.unpack_from("<i", s[8])
    names = [s[8][8 + 80 * i + 16: 8 + 80 * i + 80].rstrip(b"\0").decode() for i in range(n)]
    assert names == [f"e_binary:e_binary_{i}" for i in range(1, CUS + 1)]  # the engine's CUs, no member's
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
    assert {k: v["args"] for k, v in listed.items()} == expected_engines(repo)
    assert listed["e_binary"]["buffers"] == ["in1", "in2", "out"]
    # Every CU's reads (in1, in2: one m_axi bundle) on one bank and its writes on another,
    # round-robin over the U250's four DDR banks, each bundle reaching every bank in turn.
    assert listed["e_binary"]["cus"] == [
        ["e_binary:e_binary_1", "in1=DDR[0]", "in2=DDR[0]", "out=DDR[1]"],
        ["e_binary:e_binary_2", "in1=DDR[2]", "in2=DDR[2]", "out=DDR[3]"],
        ["e_binary:e_binary_3", "in1=DDR[1]", "in2=DDR[1]", "out=DDR[2]"]]
    assert "type=float* size=8 offset=16 port=M_AXI_GMEM0" in text  # opt=2: 32-bit ports
    assert "arg 2 out type=float* size=8 offset=40 port=M_AXI_GMEM1" in text
    assert "arg 3 opcode type=uint32_t size=4 offset=52 port=S_AXI_CONTROL" in text


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
    """The host lists the engine's members as kernels with their own arguments and the engine's
    CUs (from the member table), and an op launches its member."""
    repo, out, _ = built
    kernels = expected_kernels(repo)
    try:
        assert aten_fpga.load(str(out / "torch.xclbin")).endswith("torch.xclbin")
        assert sorted(_C.kernel_names(0)) == sorted([*kernels, "e_binary"])
        assert {k: _C.kernel_cus(k, 0) for k in [*kernels, "e_binary"]} == {k: CUS for k in [*kernels, "e_binary"]}
        assert {k: [a[0] for a in _C.kernel_args(k, 0)] for k in kernels} == kernels
        a, b = torch.randn(100_003), torch.randn(100_003)
        aten_fpga.reset_stats()
        got = torch.mul(torch.add(a.to("fpga"), b.to("fpga"), alpha=2), b.to("fpga")).cpu()
        torch.testing.assert_close(got, torch.mul(torch.add(a, b, alpha=2), b), rtol=0, atol=0)
        report = aten_fpga.report()
        assert report["add.out"]["kernels"] == {"v_add_float32": 1} and report["add.out"]["fpga"] == 1
        assert report["mul.out"]["kernels"] == {"v_mul_float32": 1} and report["mul.out"]["fpga"] == 1
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
        _write(tmp_path / "args.xclbin", ["e_binary"], "torch_emu.so")
        with pytest.raises(RuntimeError, match="e_binary has 1 arguments .* but 6"):
            aten_fpga.load(str(tmp_path / "args.xclbin"))
        (tmp_path / "junk.xclbin").write_bytes(b"not an xclbin at all" * 40)
        with pytest.raises(RuntimeError, match="not a usable xclbin: it lacks the \"xclbin2\" magic"):
            aten_fpga.load(str(tmp_path / "junk.xclbin"))
        assert aten_fpga.image().endswith("torch_emu.so")  # a refused image leaves the loaded one
    finally:
        aten_fpga.load(emu_image_path(4))
