"""Writes an xclbin container in XRT's public `xclbin.h` layout (our own code, written from the
layout, not from Xilinx's tools).

Generic over what it describes: kernels with their ports, arguments and compute units, memory
banks, and which bank each CU argument is connected to. The emulated image uses it so that the
host, and XRT's own `xrt::xclbin`, discover kernels and CUs exactly as from a v++-built xclbin.

    axlf (496 bytes, of which 456 precede the section headers) | section headers (40 bytes each)
    | sections, each 8-byte aligned: MEM_TOPOLOGY, IP_LAYOUT, CONNECTIVITY, EMBEDDED_METADATA
    [, USER_METADATA: the member table]

The member table says which kernels the host asks for by name ("members", v_add_float32) run as
an opcode of an engine kernel the image holds (e_binary). A UTF-8 text, one record per line:

    aten_fpga engines 1
    engine <engine kernel> <its opcode argument>
    member <member> <engine> <opcode> <member arg>=<engine arg> ...   (the member's args in order)

`add_members` appends it to an xclbin another tool wrote (v++'s link output). The host reads it in
host/ps/xclbin.cpp and resolves members in host/ps/engine_members.cpp.
"""
from __future__ import annotations

import hashlib
import struct
import uuid
from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

# enum axlf_section_kind
EMBEDDED_METADATA, MEM_TOPOLOGY, CONNECTIVITY, IP_LAYOUT, USER_METADATA = 2, 6, 7, 8, 16
# enum XCLBIN_MODE. The emulated image is flat, like a hardware image: XRT's noop shim loads it.
MODES = {"hw": 0, "emu": 0, "hw_emu": 4, "sw_emu": 5}
# enum MEM_TYPE
MEM_TYPES = {"DDR": 1, "HBM": 6}  # MEM_DDR4, MEM_HBM
IP_KERNEL = 1
AP_CTRL_CHAIN = 1  # dataflow kernels: a CU may start the next run while finishing this one

HEADER_BYTES = 456  # struct axlf up to m_sections (static_assert'ed by xclbin.h: 496 - 40)
SECTION_HEADER_BYTES = 40
LENGTH_AT, SIGNATURE_LENGTH_AT, NUM_SECTIONS_AT = 304, 8, 304 + 144  # m_header.m_length, ...
MEMBERS_MAGIC = "aten_fpga engines 1"  # the member table's first line
CONTROL_PORT = "S_AXI_CONTROL"
CONTROL_RANGE = 0x1000
CU_BASE, CU_STRIDE = 0x1800000, 0x10000


@dataclass(frozen=True)
class Arg:
    name: str
    pointer: bool  # an m_axi buffer (addressQualifier 1) or an s_axilite scalar (0)
    port: str  # the AXI port it travels on: M_AXI_<BUNDLE> or S_AXI_CONTROL
    size: int  # bytes of its control register(s): 8 for a buffer address
    type: str  # C type as the kernel declares it: "float*", "uint64_t"


@dataclass(frozen=True)
class Port:
    name: str
    master: bool
    data_width: int  # bits


@dataclass(frozen=True)
class Kernel:
    name: str
    ports: tuple[Port, ...]
    args: tuple[Arg, ...]
    cus: tuple[str, ...]  # compute unit names, e.g. v_add_float32_1


@dataclass(frozen=True)
class Memory:
    tag: str  # DDR[0], HBM[3], HP0
    kind: str  # a MEM_TYPES key
    size: int  # bytes
    base: int


@dataclass(frozen=True)
class Design:
    platform: str  # the platform name, written as the xclbin's VBNV
    target: str  # a MODES key
    kernels: tuple[Kernel, ...]
    memories: tuple[Memory, ...]
    # (cu name, argument index) -> memory tag, for every buffer argument of every CU
    connections: dict[tuple[str, int], str] = field(hash=False)
    emulation_image: str | None = None  # the g++ image beside the xclbin holding the kernel code
    members: str = ""  # the member table (module docstring), written as USER_METADATA when given


def _register_offsets(args: tuple[Arg, ...]) -> list[int]:
    """Control register offsets as Vitis HLS lays them out: after ap_ctrl, GIE, IER and ISR
    (0x00-0x0c), each argument in 32-bit words followed by one reserved word."""
    offsets, at = [], 0x10
    for a in args:
        offsets.append(at)
        at += (a.size + 3) // 4 * 4 + 4
    return offsets


def metadata_xml(d: Design) -> str:
    """EMBEDDED_METADATA as v++ writes it: project/platform/device/core/kernel, each kernel with
    its ports, args and one instance per CU (XRT's xclbin parser reads exactly these)."""
    q = quoteattr
    cu_index = {cu: i for i, cu in enumerate(cu for k in d.kernels for cu in k.cus)}
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<project name="torch">',
             f'  <platform vendor="xilinx" name={q(d.platform)}>',
             f'    <device name="fpga0">',
             f'      <core name="OCL_REGION_0" target={q(d.target)} type="clc_region" '
             f'numComputeUnits="{len(cu_index)}">']
    for k in d.kernels:
        lines.append(f'        <kernel name={q(k.name)} language="c" vlnv={q(f"xilinx.com:hls:{k.name}:1.0")} '
                     f'preferredWorkGroupSizeMultiple="0" workGroupSize="1" interrupt="true" '
                     f'hwControlProtocol="ap_ctrl_chain">')
        for p in k.ports:
            rng = "0xFFFFFFFFFFFFFFFF" if p.master else hex(CONTROL_RANGE)
            lines.append(f'          <port name={q(p.name)} mode="{"master" if p.master else "slave"}" '
                         f'range="{rng}" dataWidth="{p.data_width}" portType="addressable" base="0x0"/>')
        for i, (a, off) in enumerate(zip(k.args, _register_offsets(k.args))):
            lines.append(f'          <arg name={q(a.name)} addressQualifier="{int(a.pointer)}" id="{i}" '
                         f'port={q(a.port)} size="{hex(a.size)}" offset="{hex(off)}" hostOffset="0x0" '
                         f'hostSize="{hex(a.size)}" type={q(a.type)}/>')
        for cu in k.cus:
            base = CU_BASE + CU_STRIDE * cu_index[cu]
            lines += [f'          <instance name={q(cu)}>',
                      f'            <addrRemap base="{hex(base)}" range="{hex(CU_STRIDE)}" port="{CONTROL_PORT}"/>',
                      '          </instance>']
        lines.append('        </kernel>')
    lines += ['      </core>', '    </device>', '  </platform>']
    if d.emulation_image:
        # Ours, ignored by XRT: the emulated device loads the kernel code from this library.
        lines.append(f'  <emulation image={q(d.emulation_image)}/>')
    lines.append('</project>')
    return "\n".join(lines) + "\n"


def _name(text: str, size: int) -> bytes:
    raw = text.encode()
    if len(raw) >= size:
        raise ValueError(f"'{text}' is longer than the {size - 1} bytes xclbin.h allows")
    return raw.ljust(size, b"\0")


def mem_topology(d: Design) -> bytes:
    used = set(d.connections.values())
    out = struct.pack("<i4x", len(d.memories))  # m_count, then mem_data is 8-byte aligned
    for m in d.memories:
        out += struct.pack("<BB6xQQ16s", MEM_TYPES[m.kind], int(m.tag in used), m.size // 1024, m.base,
                           _name(m.tag, 16))
    return out


def ip_layout(d: Design) -> bytes:
    cus = [(k.name, cu) for k in d.kernels for cu in k.cus]
    out = struct.pack("<i4x", len(cus))
    for i, (kernel, cu) in enumerate(cus):  # sorted by base address, as XRT requires
        properties = (AP_CTRL_CHAIN << 8) | 1  # control protocol, interrupt enabled
        out += struct.pack("<IIQ64s", IP_KERNEL, properties, CU_BASE + CU_STRIDE * i, _name(f"{kernel}:{cu}", 64))
    return out


def connectivity(d: Design) -> bytes:
    ip_index = {cu: i for i, cu in enumerate(cu for k in d.kernels for cu in k.cus)}
    mem_index = {m.tag: i for i, m in enumerate(d.memories)}
    rows = []
    for k in d.kernels:
        for cu in k.cus:
            for i, a in enumerate(k.args):
                if a.pointer:
                    rows.append(struct.pack("<iii", i, ip_index[cu], mem_index[d.connections[(cu, i)]]))
    return struct.pack("<i", len(rows)) + b"".join(rows)


def container(d: Design) -> bytes:
    """The whole xclbin. Deterministic: the uuid is derived from the content and the timestamp is
    zero, so an unchanged design rebuilds to identical bytes (and SCons rebuilds nothing after it)."""
    sections = [(MEM_TOPOLOGY, "MEM_TOPOLOGY", mem_topology(d)), (IP_LAYOUT, "IP_LAYOUT", ip_layout(d)),
                (CONNECTIVITY, "CONNECTIVITY", connectivity(d)),
                (EMBEDDED_METADATA, "EMBEDDED_METADATA"[:15], metadata_xml(d).encode())]
    if d.members:
        sections.append(_members_section(d.members))
    headers, body = b"", b""
    at = HEADER_BYTES + SECTION_HEADER_BYTES * len(sections)
    for kind, name, data in sections:
        pad = -at % 8
        body += b"\0" * pad
        at += pad
        headers += struct.pack("<I16s4xQQ", kind, _name(name, 16), at, len(data))
        body += data
        at += len(data)
    digest = hashlib.sha256(headers + body).digest()
    axlf_header = struct.pack(
        "<QQQHBBHH16s64s16s16sI4x",
        at,  # m_length
        0, 0,  # m_timeStamp, m_featureRomTimeStamp
        0, 2, 13,  # version 2.13.0: the XRT release whose layout this follows
        MODES[d.target], 0,  # m_mode, m_actionMask
        b"\0" * 16,  # rom_uuid
        _name(d.platform, 64),  # m_platformVBNV
        uuid.UUID(bytes=digest[:16], version=4).bytes,  # uuid of this xclbin
        b"\0" * 16,  # m_debug_bin
        len(sections))
    prefix = b"xclbin2\0" + struct.pack("<i", -1) + b"\xff" * 28 + b"\xff" * 256 + struct.pack("<Q", 0) + axlf_header
    assert len(prefix) == HEADER_BYTES
    return prefix + headers + body


def write(path: str, d: Design) -> None:
    with open(path, "wb") as f:
        f.write(container(d))


def _is_members(text: str) -> bool:
    return text.split("\n", 1)[0] == MEMBERS_MAGIC


def _members_section(text: str) -> tuple[int, str, bytes]:
    if not _is_members(text):
        raise ValueError(f"a member table starts with the line {MEMBERS_MAGIC!r}: {text[:40]!r} does not")
    return USER_METADATA, "USER_METADATA", text.encode()


def section_table(data: bytes) -> list[tuple[int, int, int]]:
    """(kind, offset, size) of each section of an xclbin, in header order."""
    if len(data) < HEADER_BYTES or data[:8] != b"xclbin2\0":
        raise ValueError("not an xclbin: it lacks the \"xclbin2\" magic")
    count, = struct.unpack_from("<I", data, NUM_SECTIONS_AT)
    return [struct.unpack_from("<I20xQQ", data, HEADER_BYTES + SECTION_HEADER_BYTES * i) for i in range(count)]


def add_section(data: bytes, kind: int, name: str, payload: bytes) -> bytes:
    """`data` (a whole xclbin) with one more section, appended 8-byte aligned. Its header goes after
    the others, so everything behind them moves by one header (40 bytes: alignment is kept); every
    section's offset and the total length are fixed up. Nothing else changes (the uuid is the
    bitstream's), so the same input gives the same bytes."""
    if struct.unpack_from("<i", data, SIGNATURE_LENGTH_AT)[0] != -1:
        raise ValueError("the xclbin is signed: a section added after signing would void the signature; "
                         "add the member table before signing")
    length, = struct.unpack_from("<Q", data, LENGTH_AT)
    if length != len(data):
        raise ValueError(f"the xclbin's m_length is {length}, but it has {len(data)} bytes")
    table = section_table(data)
    headers_end = HEADER_BYTES + SECTION_HEADER_BYTES * len(table)
    if any(offset < headers_end or offset + size > len(data) for _, offset, size in table):
        raise ValueError("a section of the xclbin lies outside its data")
    out = bytearray(data[:headers_end] + bytes(SECTION_HEADER_BYTES) + data[headers_end:])
    out += bytes(-len(out) % 8)
    for i, (_, offset, _) in enumerate(table):
        struct.pack_into("<Q", out, HEADER_BYTES + SECTION_HEADER_BYTES * i + 24, offset + SECTION_HEADER_BYTES)
    struct.pack_into("<I16s4xQQ", out, headers_end, kind, _name(name, 16), len(out), len(payload))
    out += payload
    struct.pack_into("<Q", out, LENGTH_AT, len(out))
    struct.pack_into("<I", out, NUM_SECTIONS_AT, len(table) + 1)
    return bytes(out)


def members_of(data: bytes) -> str | None:
    """The member table of an xclbin, or None (a USER_METADATA section of another tool is not one)."""
    for kind, offset, size in section_table(data):
        text = data[offset:offset + size].decode("utf-8", "replace") if kind == USER_METADATA else ""
        if _is_members(text):
            return text
    return None


def add_members(src: str, dst: str, text: str) -> None:
    """Writes to `dst` the xclbin `src` (v++'s link output) with the member table `text` added."""
    with open(src, "rb") as f:
        data = f.read()
    if members_of(data) is not None:
        raise ValueError(f"'{src}' already has a member table")
    kind, name, payload = _members_section(text)
    with open(dst, "wb") as f:
        f.write(add_section(data, kind, name, payload))
