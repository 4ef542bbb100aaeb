"""The XRT device (host/ps/xrt_device.cpp) smoke-tested without a card, under XRT's no-op
emulation (XCL_EMULATION_MODE=noop): through the extension with ATEN_FPGA_DEVICE=xrt, so the
test drives our XrtDevice -- open the device, load an xclbin, create each kernel's compute units
by name, allocate buffers, map and sync them, start and wait runs on several CUs -- rather than
XRT alone. Under noop, runs complete without computing, so results are not checked here; the
emulated device's tests check them.

The xclbin is written here, in XRT's public xclbin.h layout, until the build writes one."""
import glob
import os
import struct
import sysconfig
import uuid

import pytest

import aten_fpga
from runtime_support import last_json, run_python

MULTIARCH_LIB = os.path.join("/usr/lib", sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu")

pytestmark = pytest.mark.skipif(
    not aten_fpga._C.xrt_built() or not glob.glob(os.path.join(MULTIARCH_LIB, "libxrt_noop.so*")),
    reason="aten_fpga was built without XRT (apt-get install libxrt-dev, then scons)")

# axlf_section_kind, MEM_TYPE, IP_TYPE from xclbin.h
EMBEDDED_METADATA, MEM_TOPOLOGY, CONNECTIVITY, IP_LAYOUT = 2, 6, 7, 8
MEM_DDR4, IP_KERNEL, AP_CTRL_HS = 1, 1, 0


def _pad8(b):
    return b + b"\0" * (-len(b) % 8)


def xclbin(kernels):
    """The smallest xclbin XRT loads: `kernels` is [(name, [(arg, ctype, bytes, port width)], cus)];
    a pointer arg (ctype ending in '*') is an m_axi port of that width, the others s_axilite."""
    mems = struct.pack("<i4x", 1) + struct.pack("<BB6xQQ16s", MEM_DDR4, 1, 1 << 20, 0x4000000000, b"DDR[0]")
    ips, conns, xml_kernels, base = [], [], [], 0x1800000
    for name, args, cus in kernels:
        ports = ['<port name="S_AXI_CONTROL" mode="slave" range="0x1000" dataWidth="32" portType="addressable" base="0x0"/>']
        xargs, offset = [], 0x10
        for i, (arg, ctype, size, width) in enumerate(args):
            if ctype.endswith("*"):
                port = f"M_AXI_GMEM{i}"
                ports.append(f'<port name="{port}" mode="master" range="0xFFFFFFFF" dataWidth="{width * 8}" '
                             f'portType="addressable" base="0x0"/>')
                qualifier, size = 1, 8
            else:
                port, qualifier = "S_AXI_CONTROL", 0
            xargs.append(f'<arg name="{arg}" addressQualifier="{qualifier}" id="{i}" port="{port}" size="{size:#x}" '
                         f'offset="{offset:#x}" hostOffset="0x0" hostSize="{size:#x}" type="{ctype}"/>')
            offset += 12 if size == 8 else 8
        instances = []
        for c in range(cus):
            cu = f"{name}_{c + 1}"
            for i, (_, ctype, _, _) in enumerate(args):
                if ctype.endswith("*"):
                    conns.append(struct.pack("<iii", i, len(ips), 0))
            ips.append(struct.pack("<IIQ64s", IP_KERNEL, (AP_CTRL_HS << 8) | ((len(ips) + 1) << 1) | 1, base,
                                   f"{name}:{cu}".encode()))
            instances.append(f'<instance name="{cu}"><addrRemap base="{base:#x}" range="0x10000" port="S_AXI_CONTROL"/></instance>')
            base += 0x10000
        xml_kernels.append(
            f'<kernel name="{name}" language="c" vlnv="xilinx.com:hls:{name}:1.0" preferredWorkGroupSizeMultiple="0" '
            f'workGroupSize="1" interrupt="true" hwControlProtocol="ap_ctrl_hs"><module name="{name}"/>'
            + "".join(ports + xargs + instances) + "</kernel>")
    xml = ('<?xml version="1.0" encoding="UTF-8"?>\n<project name="torch"><platform vendor="xilinx" '
           'boardid="aten_fpga" name="noop" featureRomTime="0"><version major="1" minor="0"/>'
           '<device name="fpga0" fpgaDevice="noop" addrWidth="0"><core name="OCL_REGION_0" target="hw" '
           f'type="clc_region" clockFreq="300MHz" numComputeUnits="{len(ips)}">' + "".join(xml_kernels)
           + "</core></device></platform></project>\n").encode()
    sections = [(MEM_TOPOLOGY, mems), (CONNECTIVITY, struct.pack("<i", len(conns)) + b"".join(conns)),
                (IP_LAYOUT, struct.pack("<i4x", len(ips)) + b"".join(ips)), (EMBEDDED_METADATA, xml)]
    names = {MEM_TOPOLOGY: b"MEM_TOPOLOGY", CONNECTIVITY: b"CONNECTIVITY", IP_LAYOUT: b"IP_LAYOUT",
             EMBEDDED_METADATA: b"EMBEDDED_METADATA"[:16]}
    offset = len(_pad8(b"\0" * (456 + 40 * len(sections))))  # axlf up to m_sections, then the headers
    headers, body = b"", b""
    for kind, data in sections:
        headers += struct.pack("<I16s4xQQ", kind, names[kind], offset + len(body), len(data))
        body += _pad8(data)
    total = offset + len(body)
    header = struct.pack("<QQQHBBHH16s64s16s16sI4x", total, 0, 0, 0, 2, 1, 0, 0, b"", b"aten_fpga:noop",
                         uuid.uuid4().bytes, b"", len(sections))
    top = b"xclbin2\0" + struct.pack("<i", -1) + b"\xff" * 284 + struct.pack("<Q", 0) + header
    assert len(header) == 152 and len(top) == 456
    return _pad8(top + headers) + body


BINARY = [("in1", "float*", 4, 4), ("in2", "float*", 4, 4), ("out", "float*", 4, 4)]
KERNELS = [("v_add_float32", BINARY + [("alpha", "float", 4, 0), ("size", "unsigned long long", 8, 0)], 2),
           ("v_mul_float32", BINARY + [("size", "unsigned long long", 8, 0)], 1)]


@pytest.fixture
def xrt_env(tmp_path):
    """XILINX_XRT: a folder whose lib/ links the multiarch libxrt_* (XRT loads lib/libxrt_noop.so.2)."""
    lib = tmp_path / "xrt" / "lib"
    lib.mkdir(parents=True)
    for so in glob.glob(os.path.join(MULTIARCH_LIB, "libxrt_*")):
        os.symlink(so, lib / os.path.basename(so))
    image = tmp_path / "torch.xclbin"
    image.write_bytes(xclbin(KERNELS))
    return {"ATEN_FPGA_DEVICE": "xrt", "XCL_EMULATION_MODE": "noop", "XILINX_XRT": str(tmp_path / "xrt"),
            "ATEN_FPGA_IMAGE": str(image)}


def test_xrt_device_under_noop(xrt_env):
    out = last_json(run_python("""
        import json, torch, aten_fpga
        from aten_fpga import _C
        r = {"kind": _C.device_kind(), "count": torch.fpga.device_count(), "name": torch.fpga.get_device_name(),
             "image": aten_fpga.image(), "capacity": _C.device_capacity()}
        r["kernels"] = {k: [_C.kernel_cus(k), _C.kernel_args(k)] for k in sorted(_C.kernel_names())}
        n = 1 << 16                                   # two CUs' worth
        a = torch.arange(n, dtype=torch.float32)
        x, y = a.to("fpga"), (a * 2).to("fpga")       # xrt::bo allocated and mapped: written via the map
        r["roundtrip"] = torch.equal(x.cpu(), a)
        aten_fpga.reset_stats()
        z = torch.add(x, y, alpha=2)                  # synced to the device, started on 2 CUs, waited
        w = z * x                                     # one CU
        w.cpu()                                       # synced back
        r["report"] = {op: [v["fpga"], v["bytes_to_device"], v["bytes_to_host"]] for op, v in aten_fpga.report().items()}
        r["cus"] = [[c["runs"], c["last_args"]] for c in _C.cu_activity()]
        r["segments"] = torch.fpga.memory_stats()["segment.all.allocated"]
        try:
            aten_fpga.load(aten_fpga.image().replace("torch.xclbin", "missing.xclbin"))
        except FileNotFoundError as e:
            r["missing"] = "no fpga device image" in str(e)
        print(json.dumps(r))
    """, **xrt_env))
    assert out["kind"] == "xrt" and out["count"] == 1
    assert out["name"] == "aten_fpga XRT device 0: XRT emulation (noop)"
    assert out["image"] == xrt_env["ATEN_FPGA_IMAGE"] and out["capacity"] == 1 << 30
    add_cus, add_args = out["kernels"]["v_add_float32"]
    assert add_cus == 2 and out["kernels"]["v_mul_float32"][0] == 1
    assert add_args == [["in1", True, 4, "f"], ["in2", True, 4, "f"], ["out", True, 4, "f"],
                        ["alpha", False, 4, "f"], ["size", False, 8, "u"]]
    assert out["roundtrip"]
    n_bytes = (1 << 16) * 4
    assert out["report"]["add.out"] == [1, 2 * n_bytes, 0]   # x and y synced to the device
    assert out["report"]["mul.out"] == [1, 0, 0]
    assert out["report"]["_copy_from"][2] == n_bytes          # w synced back
    (runs0, args0), (runs1, args1) = out["cus"]
    assert (runs0, runs1) == (2, 1)  # CU 0: half of the add, and the mul; CU 1: the add's other half
    half = 1 << 15
    assert args1 == [["buffer", half * 4]] * 3 + [["scalar", 0x40000000], ["scalar", half]]  # alpha=2.0f
    assert args0 == [["buffer", 0]] * 3 + [["scalar", 1 << 16]]  # the mul: whole range, no alpha
    assert out["segments"] >= 4 and out["missing"]



def test_pinned_memory_is_a_host_buffer_object_under_noop(xrt_env):
    """pin_memory() on the XRT device: a host-only buffer object (Device::allocate_pinned), mapped;
    copies to and from the card through it complete (noop moves no data by DMA, so their values
    are not checked); freed blocks are cached and empty_cache() releases them to XRT."""
    out = last_json(run_python("""
        import json, torch, aten_fpga
        n = 1 << 16
        a = torch.arange(n, dtype=torch.float32)
        p = a.pin_memory()
        r = {"pinned": p.is_pinned(), "view": p[10:].is_pinned(), "plain": a.is_pinned(), "same": torch.equal(p, a)}
        x = p.to("fpga", non_blocking=True)           # from the pinned buffer object
        back = torch.empty(n, pin_memory=True)
        back.copy_(x)                                 # into another one
        torch.fpga.synchronize()
        r["copied"] = back.is_pinned() and back.shape == a.shape
        del p, back
        torch.fpga.empty_cache()
        r["again"] = torch.equal(torch.ones(8).pin_memory(), torch.ones(8))
        print(json.dumps(r))
    """, **xrt_env))
    assert out == {"pinned": True, "view": True, "plain": False, "same": True, "copied": True, "again": True}
