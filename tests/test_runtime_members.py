"""Engine members: an image may hold *engines* -- one kernel that runs many member kernels, the
member chosen by an opcode argument -- and a member table (a USER_METADATA section of its xclbin)
saying which; the host keeps asking for members by name (v_add_float32) and the device layer runs
the engine (host/ps/engine_members.cpp). Tested through torch ops on a small emulated image built
here: one probe engine, `e_test`, and one kernel the image holds itself; its xclbin written by the
build's writer (site_scons/afpga/xclbin.py), which is tested here too. And on XrtDevice, under
XRT's no-op emulation, where the runs' engine arguments reach xrt::run."""
import glob
import os
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

import aten_fpga
from aten_fpga import _C
from aten_fpga._paths import build_dir, emu_image_path
from runtime_support import exact, last_json, run_python

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))
from afpga import xclbin  # noqa: E402

# The probe engine: add, mul and neg by opcode, its arguments named unlike the members' (a member's
# arguments are mapped by name). It checks what the host promises of the arguments a member leaves
# unused -- a buffer in every buffer argument (XRT needs one), 0 in every scalar -- writing NaN
# where the promise is broken. v_mul_float32 is also a kernel of its own (with 2 CUs where the
# engine has 1): where an image lists both, the host must run it, not the member.
SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <limits>

#include "image.h"

extern "C" void e_test(const float* a, const float* b, float* c, uint32_t op, float k, uint64_t n) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (uint64_t i = 0; i < n; ++i) {
    if (op == 0) c[i] = std::fma(b[i], k, a[i]);  // ATen's add: fma(b, alpha, a)
    else if (op == 1) c[i] = k == 0 ? a[i] * b[i] : nan;
    else if (op == 2) c[i] = a != nullptr ? -b[i] : nan;
    else c[i] = nan;
  }
}

extern "C" void v_mul_float32(const float* x, const float* y, float* z, uint64_t size) {
  for (uint64_t i = 0; i < size; ++i) z[i] = x[i] * y[i];
}

AFPGA_EMU_KERNEL(e_test, "a,b,c,op,k,n")
AFPGA_EMU_KERNEL(v_mul_float32, "x,y,z,size")
"""

TABLE = """aten_fpga engines 1
engine e_test op
member v_add_float32 e_test 0 in1=a in2=b out=c alpha=k size=n
member v_mul_float32 e_test 1 in1=a in2=b out=c size=n
member v_neg_float32 e_test 2 in1=b out=c size=n
"""
MEMBERS = {"v_add_float32", "v_mul_float32", "v_neg_float32"}
N = 2 * (1 << 14) + 5  # enough elements for two CUs (launch.h's kMinElementsPerCU)


def _kernel(name, args, cus):
    """An xclbin.Kernel of `args` [(name, C type)]: a buffer per `*` type on its own 32-bit port."""
    ports, xargs = [xclbin.Port("S_AXI_CONTROL", False, 32)], []
    for i, (arg, ctype) in enumerate(args):
        if ctype.endswith("*"):
            ports.append(xclbin.Port(f"M_AXI_GMEM{i}", True, 32))
            xargs.append(xclbin.Arg(arg, True, f"M_AXI_GMEM{i}", 8, ctype))
        else:
            xargs.append(xclbin.Arg(arg, False, "S_AXI_CONTROL", {"float": 4, "uint32_t": 4}.get(ctype, 8), ctype))
    return xclbin.Kernel(name, tuple(ports), tuple(xargs), tuple(f"{name}_{c + 1}" for c in range(cus)))


ENGINE = _kernel("e_test", [("a", "float*"), ("b", "float*"), ("c", "float*"), ("op", "uint32_t"), ("k", "float"),
                            ("n", "uint64_t")], 1)
DEDICATED_MUL = _kernel("v_mul_float32", [("x", "float*"), ("y", "float*"), ("z", "float*"), ("size", "uint64_t")], 2)


def design(members=TABLE, dedicated=False, emulation_image="torch_emu.so"):
    kernels = (ENGINE, DEDICATED_MUL) if dedicated else (ENGINE,)
    connections = {(cu, i): "DDR[0]" for k in kernels for cu in k.cus for i, a in enumerate(k.args) if a.pointer}
    return xclbin.Design("xilinx_u250_gen3x16_xdma_4_1_202210_1", "hw", kernels,
                         (xclbin.Memory("DDR[0]", "DDR", 1 << 30, 0x4000000000),), connections, emulation_image,
                         members)


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    """A folder holding the probe image's g++ library; tests write xclbins describing it beside it."""
    folder = tmp_path_factory.mktemp("members")
    (folder / "probe.cpp").write_text(SOURCE)
    subprocess.run(["g++", "-std=c++14", "-O2", "-shared", "-fPIC", "-DAFPGA_CUS=1", "-DAFPGA_OPT_LEVEL=1",
                    f"-I{ROOT / 'kernels/hls/emu'}", f"-I{os.path.join(build_dir(), 'gen')}", "-o",
                    str(folder / "torch_emu.so"), str(folder / "probe.cpp"), str(ROOT / "kernels/hls/emu/image.cpp")],
                   check=True, timeout=300)
    yield folder
    aten_fpga.load(emu_image_path(4))


def load(folder: Path, name: str, d: xclbin.Design) -> str:
    path = folder / name
    xclbin.write(str(path), d)
    return aten_fpga.load(str(path))


def sections(data: bytes) -> list[tuple[int, bytes]]:
    """(kind, bytes) of each section, read with xclbin.h's layout written out independently here."""
    assert data[:8] == b"xclbin2\0"
    length, = struct.unpack_from("<Q", data, 304)
    count, = struct.unpack_from("<I", data, 304 + 144)
    assert length == len(data)
    out = []
    for i in range(count):
        kind, offset, size = struct.unpack_from("<I20xQQ", data, 456 + 40 * i)
        assert offset % 8 == 0 and offset + size <= len(data)
        out.append((kind, data[offset:offset + size]))
    return out


def cu_runs():
    """Runs so far of CUs 0 and 1."""
    return ([c["runs"] for c in _C.cu_activity()] + [0, 0])[:2]


def inputs():
    torch.manual_seed(0)
    return torch.randn(N), torch.randn(N)


def test_members_run_as_their_engine(image_dir, fresh_stats):
    load(image_dir, "members.xclbin", design())
    assert set(_C.kernel_names()) == MEMBERS | {"e_test"}  # the engine is a kernel of the image too
    assert _C.kernel_args("v_add_float32") == [("in1", True, 4, "f"), ("in2", True, 4, "f"), ("out", True, 4, "f"),
                                               ("alpha", False, 4, "f"), ("size", False, 8, "u")]
    assert _C.kernel_args("v_neg_float32") == [("in1", True, 4, "f"), ("out", True, 4, "f"), ("size", False, 8, "u")]
    assert _C.kernel_cus("v_mul_float32") == 1  # the engine's
    x, y = inputs()
    fx, fy = x.to("fpga"), y.to("fpga")
    # Chained as users chain ops: each member's input is another member's output, on the device.
    s = torch.add(fx, fy, alpha=2)
    m = torch.mul(s, fy)
    n = torch.neg(m)
    exact(s, torch.add(x, y, alpha=2))
    exact(m, torch.add(x, y, alpha=2) * y)
    exact(n, -(torch.add(x, y, alpha=2) * y))
    report = aten_fpga.report()
    assert {op: report[op]["kernels"] for op in ("add.out", "mul.out", "neg.out")} == {
        "add.out": {"v_add_float32": 1}, "mul.out": {"v_mul_float32": 1}, "neg.out": {"v_neg_float32": 1}}
    # Accounting books the arguments the host passed, the member's (neg: in1, out, size).
    activity = _C.cu_activity()[0]
    assert [kind for kind, _ in activity["last_args"]] == ["buffer", "buffer", "scalar"]
    assert activity["last_args"][2] == ("scalar", N)


def test_a_kernel_the_image_holds_wins_over_a_member(image_dir, fresh_stats):
    load(image_dir, "dedicated.xclbin", design(dedicated=True))
    assert sorted(_C.kernel_names()) == sorted(MEMBERS | {"e_test"})
    assert [a[0] for a in _C.kernel_args("v_mul_float32")] == ["x", "y", "z", "size"]
    assert _C.kernel_cus("v_mul_float32") == 2
    before = cu_runs()
    x, y = inputs()
    exact(torch.mul(torch.neg(x.to("fpga")), y.to("fpga")), -x * y)
    # The neg on the engine's one CU, the mul on both of its own.
    assert [a - b for a, b in zip(cu_runs(), before)] == [2, 1]
    assert aten_fpga.stats()["mul.out"]["fpga"] == 1


def test_another_tools_user_metadata_is_not_a_member_table(image_dir, fresh_stats):
    data = xclbin.add_section(xclbin.container(design(members="")), xclbin.USER_METADATA, "USER_METADATA",
                              b"aten_fpga? no: someone else's notes")
    (image_dir / "notes.xclbin").write_bytes(data)
    aten_fpga.load(str(image_dir / "notes.xclbin"))
    assert _C.kernel_names() == ["e_test"]
    x, y = inputs()
    torch.testing.assert_close(torch.add(x.to("fpga"), y.to("fpga")).cpu(), x + y, rtol=0, atol=0)
    assert aten_fpga.stats()["add.out"]["cpu_fallback"] >= 1


def test_writer_and_adder_give_the_same_table(image_dir, fresh_stats):
    written = xclbin.container(design())
    assert [k for k, _ in sections(written)] == [6, 8, 7, 2, 16]  # USER_METADATA last
    assert dict(sections(written))[16] == TABLE.encode()
    # v++'s link output, then the member table added: every section and the uuid kept, the table
    # appended, offsets and length fixed up; the same bytes every time.
    linked = xclbin.container(design(members=""))
    (image_dir / "linked.xclbin").write_bytes(linked)
    xclbin.add_members(str(image_dir / "linked.xclbin"), str(image_dir / "added.xclbin"), TABLE)
    added = (image_dir / "added.xclbin").read_bytes()
    assert sections(added) == sections(linked) + [(16, TABLE.encode())]
    assert added[:304] == linked[:304] and added[312:448] == linked[312:448]  # all but m_length, m_numSections
    xclbin.add_members(str(image_dir / "linked.xclbin"), str(image_dir / "again.xclbin"), TABLE)
    assert (image_dir / "again.xclbin").read_bytes() == added
    assert xclbin.members_of(added) == TABLE and xclbin.members_of(linked) is None
    with pytest.raises(ValueError, match="already has a member table"):
        xclbin.add_members(str(image_dir / "added.xclbin"), str(image_dir / "twice.xclbin"), TABLE)
    with pytest.raises(ValueError, match="starts with the line 'aten_fpga engines 1'"):
        xclbin.add_members(str(image_dir / "linked.xclbin"), str(image_dir / "bad.xclbin"), "engine e_test op\n")
    signed = bytearray(linked)
    struct.pack_into("<i", signed, 8, 256)
    with pytest.raises(ValueError, match="is signed"):
        xclbin.add_section(bytes(signed), 16, "USER_METADATA", b"")
    # The C++ reader finds the added table: its members run.
    aten_fpga.load(str(image_dir / "added.xclbin"))
    assert set(_C.kernel_names()) == MEMBERS | {"e_test"}
    x, y = inputs()
    exact(torch.neg(torch.mul(x.to("fpga"), y.to("fpga"))), -(x * y))
    assert aten_fpga.report()["mul.out"]["kernels"] == {"v_mul_float32": 1}


LINES = TABLE.splitlines()
MALFORMED = {
    "version": (["aten_fpga engines 2"] + LINES[1:], r"line 1, has \"aten_fpga engines 2\": this host reads version 1"),
    "engine that is no kernel": (LINES[:1] + ["engine e_nope op"] + LINES[2:],
                                 "line 2, has engine e_nope, which is not a kernel of the image"),
    "engine twice": (LINES[:2] + LINES[1:], "line 3, has engine e_test a second time"),
    "missing opcode argument": (LINES[:1] + ["engine e_test opcode"] + LINES[2:],
                                r"line 2, has engine e_test with opcode argument opcode, which it lacks \(it has a, b, c, op, k, n\)"),
    "opcode in a buffer": (LINES[:1] + ["engine e_test a"] + LINES[2:], "opcode argument a, a buffer"),
    "unknown engine": (LINES[:2] + ["member v_abs_float32 e_other 3 in1=a out=c size=n"],
                       "line 3, has member v_abs_float32 of engine e_other, which no engine line above declares"),
    "unknown engine argument": (LINES[:2] + ["member v_abs_float32 e_test 3 in1=in1 out=c size=n"],
                                r"line 3, has member v_abs_float32 with argument in1 in in1, which engine e_test lacks \(it has a, b, c, op, k, n\)"),
    "duplicate member": (LINES + [LINES[2]], "line 6, has member v_add_float32 a second time"),
    "duplicate opcode": (LINES + ["member v_abs_float32 e_test 1 in1=a out=c size=n"],
                         "line 6, has member v_abs_float32 with opcode 1 of engine e_test, which is member v_mul_float32's"),
    "bad opcode": (LINES[:2] + ["member v_abs_float32 e_test -1 in1=a out=c size=n"],
                   "opcode -1, not a number from 0 to 4294967295"),
    "argument in the opcode": (LINES[:2] + ["member v_abs_float32 e_test 3 in1=a out=op size=n"],
                               "argument out in op, the engine's opcode argument"),
    "argument twice": (LINES[:2] + ["member v_abs_float32 e_test 3 in1=a in1=b size=n"], "argument in1 twice"),
    "two arguments in one": (LINES[:2] + ["member v_abs_float32 e_test 3 in1=a out=a size=n"],
                             "two arguments in engine argument a"),
    "not a pair": (LINES[:2] + ["member v_abs_float32 e_test 3 in1 out=c size=n"], r"argument \"in1\", not <member arg>=<engine arg>"),
    "no buffer": (LINES[:2] + ["member v_abs_float32 e_test 3 size=n"], "passes no buffer to engine e_test"),
    "member named as an engine": (LINES[:2] + ["member e_test e_test 3 in1=a out=c size=n"], "member e_test, which is an engine's name"),
    "unknown record": (LINES + ["kernel v_abs_float32"], "line 6, has \"kernel\" where `engine` or `member` belongs"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_malformed_tables_are_refused_naming_file_line_and_cause(image_dir, case):
    lines, message = MALFORMED[case]
    load(image_dir, "good.xclbin", design())
    bad = image_dir / "bad.xclbin"
    # Added as raw bytes: the writer itself refuses a table without the magic line.
    table = ("\n".join(lines) + "\n").encode()
    bad.write_bytes(xclbin.add_section(xclbin.container(design(members="")), xclbin.USER_METADATA, "USER_METADATA", table))
    with pytest.raises(RuntimeError, match=f"'{bad}' is not a usable xclbin: its member table \\(USER_METADATA\\), "
                                           f".*{message}"):
        aten_fpga.load(str(bad))
    assert aten_fpga.image() == str(image_dir / "good.xclbin")  # a refused image leaves the loaded one
    assert "v_add_float32" in _C.kernel_names()


MULTIARCH_LIB = os.path.join("/usr/lib", sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu")


@pytest.mark.skipif(not _C.xrt_built() or not glob.glob(os.path.join(MULTIARCH_LIB, "libxrt_noop.so*")),
                    reason="aten_fpga was built without XRT (apt-get install libxrt-dev, then scons)")
def test_xrt_device_runs_members_through_the_engine(tmp_path):
    """XrtDevice under XCL_EMULATION_MODE=noop (runs complete without computing): members are listed
    with the member's arguments and the engine's CUs, and their runs reach xrt::run by engine slot
    (an unused engine buffer gets one of the run's: XRT takes no run without a bo there)."""
    lib = tmp_path / "xrt" / "lib"
    lib.mkdir(parents=True)
    for so in glob.glob(os.path.join(MULTIARCH_LIB, "libxrt_*")):
        os.symlink(so, lib / os.path.basename(so))
    image = tmp_path / "torch.xclbin"
    xclbin.write(str(image), design(emulation_image=None))
    out = last_json(run_python("""
        import json, torch, aten_fpga
        from aten_fpga import _C
        r = {"kernels": {k: [_C.kernel_cus(k), _C.kernel_args(k)] for k in sorted(_C.kernel_names())}}
        x = torch.randn(1000).to("fpga")
        aten_fpga.reset_stats()
        torch.neg(torch.add(x, x, alpha=3)).cpu()
        r["kernels_run"] = {op: v["kernels"] for op, v in aten_fpga.report().items() if v["kernels"]}
        r["last_args"] = _C.cu_activity()[0]["last_args"]
        print(json.dumps(r))
    """, ATEN_FPGA_DEVICE="xrt", XCL_EMULATION_MODE="noop", XILINX_XRT=str(tmp_path / "xrt"),
        ATEN_FPGA_IMAGE=str(image)))
    assert sorted(out["kernels"]) == sorted(MEMBERS | {"e_test"})
    assert out["kernels"]["v_neg_float32"] == [1, [["in1", True, 4, "f"], ["out", True, 4, "f"], ["size", False, 8, "u"]]]
    assert out["kernels_run"] == {"add.out": {"v_add_float32": 1}, "neg.out": {"v_neg_float32": 1}}
    assert out["last_args"] == [["buffer", 0], ["buffer", 0], ["scalar", 1000]]
