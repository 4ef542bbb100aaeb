"""The platforms we know how to build for: their Vitis names, memory and kind.

`sp=` in the link config needs the platform's memory tags, and the emulated xclbin's MEM_TOPOLOGY
mirrors them, so one table serves both. Sizes and base addresses are nominal (the real shell
reports its own); only the tags and the bank count shape the build.
"""
from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class Bank:
    tag: str  # the sp= memory name: DDR[0], HBM[7], HP0
    kind: str  # "DDR" | "HBM": the MEM_TOPOLOGY memory type
    size: int  # bytes
    base: int  # nominal base address


@dataclass(frozen=True)
class Platform:
    alias: str
    name: str  # the .xpfm name v++ --platform takes
    card: str
    vitis: str  # the Vitis release the platform ships for (names settings64.sh)
    banks: tuple[Bank, ...]
    # For the performance model (bench/perf_model.py), from the cards' data sheets: peak bandwidth
    # of one bank (GB/s) and of the host link per direction (PCIe Gen3 x16 after protocol
    # overhead; None where the PL shares the host's memory).
    bank_gbps: float
    host_link_gbps: float | None
    # Compute units of each streaming engine at XCL_OPT 3 and 4 (the default cus=): an engine CU has
    # two m_axi masters (reads, writes), each on its own bank at one port word per cycle, so a
    # card's peak bandwidth needs about as many masters as it has banks. DDR cards and the Zynq's
    # HP ports: 2 CUs over 4 banks. HBM cards also 2 (4 of 32 pseudo-channels): every CU of an
    # engine builds all its members, and more do not fit beside the rest of the image.
    stream_cus: int
    embedded: bool = False  # Zynq MPSoC: v++ -p packages the xclbin with the boot image
    # The same at XCL_OPT 4 where the whole table's 512-bit engines fit only one CU each beside the
    # rest (the U200: LUT 119% with 2, 95% with 1; docs/building.md, "Will it fit?").
    vector_stream_cus: int | None = None
    # Streaming engines that get fewer CUs than the others at XCL_OPT 4, (category, CUs): the HBM
    # cards' whole table fits with one strided-copy engine (31K LUT a CU; LUT 101% with two).
    vector_stream_cus_of: tuple[tuple[str, int], ...] = ()

    @property
    def memory(self) -> str:
        """e.g. "DDR[0..3]" for the docs, `scons -h` and the report."""
        first, last = self.banks[0].tag, self.banks[-1].tag
        if "[" in first:
            return f"{first.split('[')[0]}[0..{len(self.banks) - 1}]"
        return f"{first}..{last}"


def _indexed(kind: str, count: int, size: int) -> tuple[Bank, ...]:
    return tuple(Bank(f"{kind}[{i}]", kind, size, i * size) for i in range(count))


PLATFORMS: dict[str, Platform] = {p.name: p for p in (
    Platform("u200", "xilinx_u200_gen3x16_xdma_2_202110_1", "Alveo U200", "2021.1",
             _indexed("DDR", 4, 16 * GiB), 19.2, 12.0, 2, vector_stream_cus=1),
    Platform("u250", "xilinx_u250_gen3x16_xdma_4_1_202210_1", "Alveo U250", "2022.1",
             _indexed("DDR", 4, 16 * GiB), 19.2, 12.0, 2),
    Platform("u50", "xilinx_u50_gen3x16_xdma_5_202210_1", "Alveo U50", "2022.1",
             _indexed("HBM", 32, 256 * MiB), 316 / 32, 12.0, 2),
    Platform("u55c", "xilinx_u55c_gen3x16_xdma_3_202210_1", "Alveo U55C", "2022.1",
             _indexed("HBM", 32, 512 * MiB), 460 / 32, 12.0, 2, vector_stream_cus_of=(("copy", 1),)),
    # The U280 also has two DDR4 banks; kernels are spread over its 32 HBM pseudo-channels.
    Platform("u280", "xilinx_u280_gen3x16_xdma_1_202211_1", "Alveo U280", "2022.2",
             _indexed("HBM", 32, 256 * MiB), 460 / 32, 12.0, 2, vector_stream_cus_of=(("copy", 1),)),
    # The PL reaches the PS DDR through the high-performance ports: the sp= tags are the ports,
    # and every one of them sees the same 4 GiB.
    Platform("zcu102", "xilinx_zcu102_base_202210_1", "ZCU102 (Zynq UltraScale+ MPSoC)", "2022.1",
             tuple(Bank(f"HP{i}", "DDR", 4 * GiB, 0) for i in range(4)), 19.2 / 4, None, 2, embedded=True),
)}

ALIASES = {p.alias: p.name for p in PLATFORMS.values()}
DEFAULT = "xilinx_u250_gen3x16_xdma_4_1_202210_1"


def describe() -> str:
    """The table as `scons -h` and errors print it."""
    return "\n".join(f"    {p.alias:<7} {p.name:<40} {p.card}, {p.memory}{', embedded' if p.embedded else ''}"
                     for p in PLATFORMS.values())


# The GEMM kernel's PE array at XCL_OPT 4 (gemm_pe=, PM x PN float32 multiply-adds per cycle) and
# its CUs by default, per card. A CU sits in one SLR, so its array is at most what one SLR's share
# of the DSPs holds (about 5 DSPs a float32 MAC); the U200, U250, U55C and U280 defaults are the
# largest array and CU count with which the whole table's XCL_OPT 4 image fits beside the GEMM
# (tests/test_codegen_engines.py checks both ways). Where that image fits no array (U50, ZCU102)
# the array is one SLR's, for the images of fewer kernels that do fit. DSPS are the data
# sheets' DSP48E2 counts.
DSPS = {"u200": 6840, "u250": 12288, "u50": 5952, "u55c": 9024, "u280": 9024, "zcu102": 2520}
GEMM_PE = {"u200": (16, 16), "u250": (20, 20), "u50": (20, 20), "u55c": (8, 20), "u280": (8, 20),
           "zcu102": (16, 16)}
GEMM_CUS = {"u250": 2}  # the default array's CUs where more than one fits beside the whole table


# The emulated image's default: g++ runs the array as loops on the host CPU, where the geometry
# changes no result (each output's sum is taken in k order whatever PM x PN) but the speed does:
# 16 x 48 (three 16-float words a row) ran a 2048^3 mm in 14% less CPU time than four CUs of 16 x 24
# (bench/bench_ops.py --ops mm; docs/kernels.md, GEMM), and 15-20% faster than 16 x 44, whose rows
# end in part of a word. The emulated image has the card's GEMM CUs (gemm_cus), whatever its array:
# what the card splits a product into, the emulator splits alike. `gemm_pe=32x48` emulates another
# array.
EMU_GEMM_PE = (16, 48)


def parse_gemm_pe(text: str) -> tuple[int, int] | None:
    """"PMxPN" as (PM, PN), each a multiple of 4 from 4 to 64; None if it is not one (gemm_pe=, a
    plan's build.gemm_pe)."""
    pm, _, pn = text.partition("x")
    if not all(v.isdigit() and 4 <= int(v) <= 64 and int(v) % 4 == 0 for v in (pm, pn)):
        return None
    return int(pm), int(pn)


def gemm_pe_default(p: Platform, target: str = "hw") -> str:
    pm, pn = EMU_GEMM_PE if target == "emu" else GEMM_PE[p.alias]
    return f"{pm}x{pn}"


DSP_BUDGET = 0.6  # of a card's DSPs, for the arrays of a gemm_pe= other than the default (the rest: the image's)
DSPS_PER_MAC = 5  # a float32 multiply-add


def gemm_cus(p: Platform, pe: tuple[int, int], target: str = "hw") -> int:
    """GEMM engine CUs at XCL_OPT 4, each holding one PM x PN array (its members, float32 and
    float16, share it): with the card's default array (or the emulated image's, which stands for
    it), the default CUs (GEMM_CUS); with another (gemm_pe=), as many as fit in DSP_BUDGET of the
    card's DSPs, at least one."""
    if pe == GEMM_PE[p.alias] or (target == "emu" and pe == EMU_GEMM_PE):
        return GEMM_CUS.get(p.alias, 1)
    return max(1, int(DSP_BUDGET * DSPS[p.alias]) // (pe[0] * pe[1] * DSPS_PER_MAC))
