"""What an image asks of a card, estimated before any v++ runs, and whether it fits.

Per kernel: its interface (one s_axilite control port, one m_axi adapter per bundle at the bundle's
width), its datapath (lanes x the element function's operators, by op class and dtype) and its
memories, times its compute units; per image: those sums, the compute units and the m_axi masters
on each memory bank (from the link plan), against the card's limits and what its shell leaves.
Every unit cost is a csynth or data-sheet figure, cited in docs/building.md ("Will it fit?");
where no public figure exists the assumption is named there. The estimate is for refusing what
cannot fit (an order of magnitude too big) in seconds; csynth and the link's utilization report
remain the truth for what barely fits.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field

from codegen.model import COSTLY_OPS, WIDE_FOLDS

from .platforms import Platform

MAX_CUS = 128  # XRT serves 128 compute units per device (MAX_CUS in its kernel driver scheduler)
MAX_PORTS_PER_BANK = 15  # kernel interfaces per DDR bank or HBM pseudo-channel (UG1393)
BUDGET = 0.8  # of what the shell leaves: placement and routing need the rest

RESOURCES = ("lut", "ff", "dsp", "bram36", "uram")


@dataclass(frozen=True)
class Resources:
    lut: float = 0
    ff: float = 0
    dsp: float = 0
    bram36: float = 0
    uram: float = 0

    def __add__(self, o: Resources) -> Resources:
        return Resources(*(getattr(self, r) + getattr(o, r) for r in RESOURCES))

    def __sub__(self, o: Resources) -> Resources:
        return self + o * -1

    def __mul__(self, k: float) -> Resources:
        return Resources(*(getattr(self, r) * k for r in RESOURCES))

    def as_dict(self) -> dict[str, int]:
        return {r: int(math.ceil(getattr(self, r))) for r in RESOURCES}


# --- unit costs ----------------------------------------------------------------------------------
CONTROL = Resources(lut=490, ff=291)  # s_axilite control interface (vadd csynth)
# m_axi adapters at default depths: 32 bit 580 LUT / 512 FF / 4 BRAM18, 512 bit 1,052 LUT / 881 FF /
# 16 BRAM18 (csynth tables; UG1399 "M_AXI Resources"); other widths interpolated linearly.
AXI_32 = Resources(lut=580, ff=512, bram36=2)
AXI_512 = Resources(lut=1052, ff=881, bram36=8)
# The interconnect's share per master (SmartConnect, PG247): no public per-master figure; assumed
# to be one 512-bit adapter's logic without its FIFOs.
INTERCONNECT = Resources(lut=1052, ff=881)
# A control register, per bit: its flip-flop and a share of the read-back multiplexer (an
# assumption: the vadd csynth figure above is ~490 LUT for its 4 registers and handshake).
REGISTER_BIT = Resources(lut=0.5, ff=1)

# One lane's element function, float32: a simple op is one fadd (2 DSP, full_dsp), a transcendental
# one fexp's 7 DSP (csynth); the LUT/FF beside the DSPs are an assumption (fadd: ~200 LUT, 300 FF).
SIMPLE_F32 = Resources(lut=200, ff=300, dsp=2)
TRANSCENDENTAL_F32 = Resources(lut=1500, ff=2000, dsp=7)
MAC_F32 = Resources(lut=200, ff=300, dsp=5)  # a multiply-add: fmul (3 DSP) + fadd (2 DSP)
# Other dtypes relative to float32: half precision about half, double about three times (dmul 11
# DSP, dadd 3), complex a product's 4 multiplies and 2 adds; integers no DSP, logic per bit.
DTYPE_SCALE = {"float16": 0.5, "bfloat16": 0.5, "float32": 1.0, "float64": 3.0, "complex64": 4.0}
INT_LANE_PER_BIT = Resources(lut=3, ff=2)

TRANSCENDENTAL = COSTLY_OPS  # codegen/model.py: the ops Kernel.compute_lanes builds fewer lanes of

# Per category, beyond the lanes' element functions: stages and buffers (assumptions, named in
# docs/building.md): dataflow levels keep each stream in LUTRAM, a tile buffer (XCL_OPT 1, and the
# tiled categories) 4,096 words in BRAM36 (36 kbit each).
STREAM = Resources(lut=150, ff=200)
TILE_WORDS = 4096


def bits_of(dtype: str) -> int:
    m = re.search(r"(\d+)$", dtype)
    return int(m.group(1)) if m else 8  # bool


def lane_cost(op: str, dtype: str, category: str) -> Resources:
    """One lane of the kernel's datapath."""
    if category in ("copy", "index", "range", "randperm", "fill", "im2col") and not op.startswith("dw_"):
        return INT_LANE_PER_BIT * bits_of(dtype)  # moves, compares and counters: no arithmetic
    if category == "reduce" and dtype == "float32" and op in WIDE_FOLDS:
        dtype = "float64"  # its lanes fold in double (codegen/model.py WIDE_FOLDS)
    scale = DTYPE_SCALE.get(dtype)
    if scale is None:  # integers and bool
        return INT_LANE_PER_BIT * bits_of(dtype)
    if category in ("gemm", "fused_adam", "fused_sgd", "norm") or op in ("addcmul", "addcdiv", "lerp", "dw_window",
                                                                            "dw_weight"):
        base = MAC_F32
    else:
        base = TRANSCENDENTAL_F32 if op in TRANSCENDENTAL or category in ("rng", "fft", "ctc") else SIMPLE_F32
    return base * scale


def axi_adapter(width: int) -> Resources:
    t = (min(max(width, 32), 512) - 32) / 480
    return AXI_32 + (AXI_512 - AXI_32) * t


@dataclass(frozen=True)
class KernelEstimate:
    name: str
    category: str
    cus: int
    ports: int  # m_axi bundles of one CU
    lanes: int
    per_cu: Resources

    @property
    def total(self) -> Resources:
        return self.per_cu * self.cus


def lanes_of(top) -> int:
    """Elements per port word: an hls::vector's lanes (XCL_OPT 4), else one."""
    for a in top.args:
        m = re.search(r"hls::vector<.+,\s*(\d+)>", a.type) if a.pointer else None
        if m:
            return int(m.group(1))
    return 1


def datapath(top, category: str, op: str, dtype: str, opt: int, gemm_pe: tuple[int, int],
             compute_lanes: int | None = None, memories: dict | None = None, uram: bool = False) -> Resources:
    """One kernel's compute, streams and local memories (its interface aside): in an engine, one
    member's. `memories`: its arrays as codegen/storage.py reads them from its source, on a card
    with UltraRAM if `uram`; without them (a fused kernel) a tile of TILE_WORDS port words where the
    template has one."""
    bundles = {a.bundle: a.width or 32 for a in top.args if a.pointer}
    lanes = min(compute_lanes or lanes_of(top), lanes_of(top))  # an element-per-cycle template has one lane
    out = Resources()
    if category == "gemm" and opt == 4:
        # The member's own stages around the PE array (which is the CU's: gemm_array): its write
        # stage's epilogue, alpha * acc + beta * c in float on each lane of a port word, whatever
        # the dtype (a float16 member's word has 32).
        return lane_cost(op, "float32", category) * lanes + STREAM * (len(bundles) + 1)
    if memories is not None:
        out = out + memory_cost(memories, uram)
    elif opt == 1 or category in ("reduce", "pool", "norm", "fft", "gemm", "im2col"):
        word_bits = max(bundles.values(), default=32)
        out = out + Resources(bram36=math.ceil(TILE_WORDS * word_bits / 36864))
    out = out + lane_cost(op, dtype, category) * lanes
    if opt >= 2:
        out = out + STREAM * (len(bundles) + 1)
    return out


def memory_cost(m: dict, uram: bool) -> Resources:
    """Arrays as codegen/storage.py sums them, on a card with UltraRAM if `uram`."""
    return Resources(bram36=m["uram_bram36"], uram=m["uram"]) if uram else Resources(bram36=m["bram36"])


def gemm_array(gemm_pe: tuple[int, int]) -> Resources:
    """The XCL_OPT 4 GEMM's PE array, once per CU: every member (float32, float16) and a fused GEMM
    run the same float32 array (kernels/hls/gemm/opt4.cpp.j2), PM x PN multiply-adds, with its a
    and b tiles double-buffered, one BRAM36 bank per PE row and column (sized by gemm_pe=, which
    the source leaves to the build)."""
    return MAC_F32 * (gemm_pe[0] * gemm_pe[1]) + Resources(bram36=2 * (gemm_pe[0] + gemm_pe[1]))


# A pointwise engine's shared datapath (codegen/engines.py Datapath): its members' element
# functions sit behind a switch on the opcode, a run-invariant register, so their operations are
# mutually exclusive and the scheduler binds them to shared units (UG1448, "Mutual Exclusion,
# Resources, and Predicates"). Assumed: the largest member's lane sets the shared floating-point
# units (DSPs, and their LUT/FF); every other member keeps SHARED_REST of its lane's logic (its
# comparisons, bit manipulation and constants), and adds a way to the lane's result multiplexer
# (a LUT6 is a 4:1 multiplexer per bit: about bits/3 LUTs per way).
SHARED_REST = 0.3


def shared_datapath(top, members: list, category: str, opt: int) -> Resources:
    """One datapath that `members` (gen.KernelSource, with the same port words and compute lanes)
    share: one set of streams and read/write stages, and per lane the units their element
    functions need once, plus each member's own logic and a multiplexer way."""
    bundles = {a.bundle for a in top.args if a.pointer}
    lanes = members[0].compute_lanes or lanes_of(top)
    costs = sorted((lane_cost(m.op, m.dtype, category) for m in members), key=lambda r: -r.lut)
    out_bits = max(a.width or 32 for a in top.args if a.pointer) // max(1, lanes_of(top))
    lane = Resources(dsp=max(c.dsp for c in costs)) + Resources(costs[0].lut, costs[0].ff)
    for c in costs[1:]:
        lane = lane + Resources(c.lut, c.ff) * SHARED_REST + Resources(lut=out_bits / 3)
    return lane * lanes + (STREAM * (len(bundles) + 1) if opt >= 2 else Resources())


def interface(top) -> Resources:
    """A CU's control interface (its registers too), m_axi adapters and share of the interconnect."""
    out = CONTROL + REGISTER_BIT * sum(a.width or 64 for a in top.args if not a.pointer) \
        + REGISTER_BIT * (64 * sum(1 for a in top.args if a.pointer))
    for bundle in top.bundles:
        width = max(a.width or 32 for a in top.args if a.pointer and a.bundle == bundle)
        out = out + axi_adapter(width) + INTERCONNECT
    return out


def kernel_estimate(top, k, member_tops: dict, cus: int, opt: int, gemm_pe: tuple[int, int],
                    memories: dict | None = None, uram: bool = False,
                    datapaths: list | None = None) -> KernelEstimate:
    """`k`: the gen.KernelSource of `top`; an engine's members each bring their datapath and arrays,
    but those of one shared datapath (`datapaths`: lists of opcodes) bring one together."""
    memories = memories or {}
    groups = [[k.members[i] for i in opcodes] for opcodes in datapaths or ()]
    alone = set(range(len(k.members))) - {i for opcodes in datapaths or () for i in opcodes}
    parts = [shared_datapath(member_tops[ms[0].name], ms, k.category, opt) for ms in groups]
    if groups and top.name in memories:  # the shared datapaths' arrays, in the engine's own source
        parts.append(memory_cost(memories[top.name], uram))
    parts += [datapath(member_tops[m.name], m.category, m.op, m.dtype, opt, gemm_pe, m.compute_lanes,
                       memories.get(m.name), uram) for i, m in enumerate(k.members) if i in alone]
    if not k.members:
        parts = [datapath(top, k.category, k.op, k.dtype, opt, gemm_pe, None, memories.get(k.name), uram)]
    per_cu = interface(top) + (gemm_array(gemm_pe) if k.category == "gemm" and opt == 4 else Resources())
    for part in parts:
        per_cu = per_cu + part
    # The arrays the members share (a reduce engine's column tiles): once per CU, by name.
    shared = {}
    for m in k.members or (k,):
        shared.update((memories.get(m.name) or {}).get("shared", {}))
    for m in shared.values():
        per_cu = per_cu + memory_cost(m, uram)
    lanes = max((lanes_of(member_tops[m.name]) for m in k.members), default=lanes_of(top))
    return KernelEstimate(top.name, k.category, cus, len(top.bundles), lanes, per_cu)


# --- the card ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Capacity:
    """What the shell leaves for kernels (docs/building.md cites each figure)."""
    left: Resources
    slrs: int
    source: str


CAPACITY = {
    "u250": Capacity(Resources(lut=1_379_740, ff=2_759_480, dsp=11_508, bram36=2_000, uram=1_280), 4,
                     "xdma_201830_2 shell's figures (FF assumed 2 per LUT)"),
    "u200": Capacity(Resources(lut=979_040, ff=1_958_080, dsp=5_880, bram36=1_860, uram=800), 3,
                     "UG1702 Resource Availability, gen3x16_xdma_2"),
    "u280": Capacity(Resources(lut=1_303_680 - 166_000, ff=2_607_360 - 332_000, dsp=9_020, bram36=2_016 - 323,
                               uram=960), 3, "device minus the larger platform figure published"),
    "u55c": Capacity(Resources(lut=1_303_680 - 166_000, ff=2_607_360 - 332_000, dsp=9_020, bram36=2_016 - 323,
                               uram=960), 3, "not published; assumed as the U280"),
    "u50": Capacity(Resources(lut=870_720 - 113_000, ff=1_743_360 - 226_000, dsp=5_952, bram36=1_344 - 180,
                              uram=640), 2, "device minus the published platform share"),
    "zcu102": Capacity(Resources(lut=274_080 * 0.9, ff=548_160 * 0.9, dsp=2_520 * 0.9, bram36=912 * 0.9), 1,
                       "device less ~10% for the platform (UG1393)"),
}


def has_uram(p: Platform) -> bool:
    """Whether the card has UltraRAM: its kernels are compiled with -DAFPGA_URAM, which binds their
    large arrays there (BIND_STORAGE impl=uram)."""
    return CAPACITY[p.alias].left.uram > 0


@dataclass(frozen=True)
class Overflow:
    what: str
    need: float
    limit: float
    fix: str


@dataclass(frozen=True)
class Fit:
    platform: Platform
    kernels: tuple[KernelEstimate, ...]
    ports_per_bank: dict[str, int]
    overflows: tuple[Overflow, ...] = field(default=())

    @property
    def cus(self) -> int:
        return sum(k.cus for k in self.kernels)

    @property
    def total(self) -> Resources:
        out = Resources()
        for k in self.kernels:
            out = out + k.total
        return out

    @property
    def capacity(self) -> Capacity:
        return CAPACITY[self.platform.alias]

    @property
    def fits(self) -> bool:
        return not self.overflows

    def to_json(self) -> dict:
        cap = self.capacity
        return {
            "fits": self.fits, "cus": self.cus, "max_cus": MAX_CUS,
            "ports_per_bank": self.ports_per_bank, "max_ports_per_bank": MAX_PORTS_PER_BANK,
            "total": self.total.as_dict(), "left_by_shell": cap.left.as_dict(), "budget": BUDGET,
            "slrs": cap.slrs, "capacity_source": cap.source,
            "kernels": [{"name": k.name, "category": k.category, "cus": k.cus, "ports": k.ports, "lanes": k.lanes,
                         "per_cu": k.per_cu.as_dict(), "total": k.total.as_dict()} for k in self.kernels],
            "overflows": [{"what": o.what, "need": round(o.need), "limit": round(o.limit), "fix": o.fix}
                          for o in self.overflows],
        }


def estimate(plan, kernels, member_tops: dict, opt: int, gemm_pe: tuple[int, int], cus_given: bool,
             memories: dict | None = None, datapaths: dict | None = None) -> Fit:
    """`plan`: the link plan (connectivity.plan); `kernels`: the image's KernelSources (engines with
    their members); `member_tops`: the members' interfaces, by name; `memories`: each kernel's arrays;
    `datapaths`: each pointwise engine's shared datapaths (opcode lists), from the interface file."""
    uram = has_uram(plan.platform)
    sources = {k.name: k for k in kernels}
    estimates = []
    for top, names in plan.kernels:
        estimates.append(kernel_estimate(top, sources[top.name], member_tops, len(names), opt, gemm_pe, memories, uram,
                                         (datapaths or {}).get(top.name)))
    ports = {b.tag: 0 for b in plan.platform.banks}
    for top, names in plan.kernels:
        for cu in names:
            for bundle in top.bundles:
                arg = next(a for a in top.args if a.pointer and a.bundle == bundle)
                ports[plan.banks[(cu, arg.name)]] += 1
    fit = Fit(plan.platform, tuple(estimates), ports)
    return dataclasses.replace(fit, overflows=tuple(_overflows(fit, cus_given)))


def _overflows(fit: Fit, cus_given: bool):
    fewer = ("give fewer CUs (cus=1)" if cus_given else
             "build a workload's image (python -m aten_fpga.record, then plan=), select fewer kernels (kernels=..., "
             "dtypes=...)") + " or a lower opt= (docs/building.md, \"Will it fit?\", shows what fits each card)"
    if fit.cus > MAX_CUS:
        yield Overflow("compute units (XRT's limit)", fit.cus, MAX_CUS, fewer)
    worst = max(fit.ports_per_bank.items(), key=lambda kv: kv[1])
    if worst[1] > MAX_PORTS_PER_BANK:
        yield Overflow(f"m_axi masters on {worst[0]} (Vitis: 15 per bank)", worst[1], MAX_PORTS_PER_BANK, fewer)
    total, cap = fit.total, fit.capacity
    for r in RESOURCES:
        have = getattr(cap.left, r) * BUDGET
        if getattr(total, r) > have:
            yield Overflow(f"{r.upper()} (80% of what the shell leaves)", getattr(total, r), have, fewer)
    slr = cap.left * (BUDGET / cap.slrs)
    for k in fit.kernels:
        over = [r for r in RESOURCES if getattr(k.per_cu, r) > getattr(slr, r)]
        if over:
            yield Overflow(f"one CU of {k.name} in one SLR ({', '.join(r.upper() for r in over)})",
                           max(getattr(k.per_cu, r) / getattr(slr, r) for r in over) * 100, 100,
                           "a smaller PE array (gemm_pe=) or fewer lanes")


def table(fit: Fit, top: int = 8) -> str:
    """The estimate as text: totals against the card, the largest kernels, and what overflows."""
    cap, total = fit.capacity, fit.total
    lines = [f"Resource estimate for {fit.platform.card} ({fit.platform.name}), {len(fit.kernels)} kernels:",
             f"  {'':<22}{'need':>12}{'80% of left':>14}{'use':>8}"]
    lines.append(f"  {'compute units':<22}{fit.cus:>12,}{MAX_CUS:>14,}{fit.cus / MAX_CUS:>8.0%}")
    worst = max(fit.ports_per_bank.values())
    lines.append(f"  {'masters per bank':<22}{worst:>12,}{MAX_PORTS_PER_BANK:>14,}{worst / MAX_PORTS_PER_BANK:>8.0%}")
    for r in RESOURCES:
        have = getattr(cap.left, r) * BUDGET
        need = getattr(total, r)
        use = f"{need / have:.0%}" if have else "-"
        lines.append(f"  {r.upper():<22}{math.ceil(need):>12,}{math.floor(have):>14,}{use:>8}")
    biggest = sorted(fit.kernels, key=lambda k: -k.total.lut)[:top]
    lines.append("  largest kernels (LUT): " + ", ".join(f"{k.name} x{k.cus} {math.ceil(k.total.lut):,}" for k in biggest))
    if fit.overflows:
        lines.append("  DOES NOT FIT:")
        lines += [f"    {o.what}: needs {o.need:,.0f}, the limit is {o.limit:,.0f} -- {o.fix}" for o in fit.overflows]
    return "\n".join(lines)


# --- the build's view ----------------------------------------------------------------------------

def params(cfg, kernels) -> dict:
    """What the estimate needs that SCons knows when it reads the build (a Value node's text)."""
    def source(k) -> dict:
        return {"name": k.name, "category": k.category, "dtype": k.dtype, "op": k.op,
                "compute_lanes": k.compute_lanes, "members": [source(m) for m in k.members]}

    return {"platform": cfg.platform.name, "opt": cfg.opt, "gemm_pe": list(cfg.gemm_pe), "cus_given": cfg.cus_given,
            "cus": {k.name: cfg.engine_cus(k) for k in kernels}, "kernels": [source(k) for k in kernels]}


def fit_of(interface_path: str, p: dict) -> Fit:
    """The estimate of the image `p` describes, from the codegen's interface file."""
    from . import connectivity, hls_interface
    from .gen import KernelSource
    from .platforms import PLATFORMS

    def source(k: dict) -> KernelSource:
        return KernelSource(k["name"], k["category"], k["dtype"], "", k["op"],
                            tuple(source(m) for m in k["members"]), k["compute_lanes"])

    kernels = [source(k) for k in p["kernels"]]
    tops = hls_interface.load(interface_path, [k.name for k in kernels])
    members = hls_interface.load(interface_path, [m.name for k in kernels for m in k.members])
    plan = connectivity.plan(tops, p["cus"], PLATFORMS[p["platform"]])
    with open(interface_path, encoding="utf-8") as f:
        doc = json.load(f)
    for k in kernels:  # the file must be this selection's: its datapaths index the engines' members
        if k.members and doc.get("engines", {}).get(k.name, [m.name for m in k.members]) != [m.name for m in k.members]:
            raise ValueError(f"{interface_path} holds another selection's {k.name} (its codegen ran for other kernels=)")
    return estimate(plan, kernels, {t.name: t for t in members}, p["opt"], tuple(p["gemm_pe"]), p["cus_given"],
                    doc.get("memories", {}), doc.get("datapaths", {}))
