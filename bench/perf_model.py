"""A hardware performance model beside the measurements: for each kernel category, XCL_OPT level and
known platform, the throughput the design can reach, the share of the card's peak memory bandwidth
it uses, the projected speed-up over torch on this machine's CPU, and the energy per op beside the
CPU's and an H100's.

    python bench/perf_model.py [--json PATH] [--n N] [--kernels K,...] [--dtypes D,...]
    python bench/perf_model.py --cnn      (the LeNet / ResNet-block layers: docs/img/cnn_layers.png)
    python bench/perf_model.py --fft      (batched FFTs beside Vitis' SSR FFT: docs/img/fft_model.png)
    python bench/perf_model.py --compile  (torch.compile's fused step beside eager on a U250, from
                                           bench/bench_compile.py's launches and bytes)

The image projected is the one the build makes (`--kernels`/`--dtypes` select as scons' kernels= and
dtypes= do; default the whole table), read from the build's own modules, not restated here:
- its kernels: codegen.plan (our table and the kernel library), grouped into ENGINES
  (codegen/engines.py): one HLS top per category whose members are the per-(op, dtype) kernels,
  selected by an opcode. The members' and engines' interfaces are rendered from the templates
  (codegen.gen_hls; no torch) as the codegen does: each port's word and bundle;
- an engine CU has two m_axi masters: every read port on gmem0, every write port on gmem1. A
  member's input streams share gmem0's read channel (one port word a cycle between them), its
  outputs gmem1's write channel;
- CUs per engine: site_scons/afpga/variables.py Config.engine_cus (at XCL_OPT 3 and 4 the streaming
  engines get Platform.stream_cus, the GEMM engine at 4 platforms.gemm_cus for its gemm_pe array
  per member dtype, the rest one); each CU bundle's bank: connectivity.plan; the ports sharing a
  bank share its peak bandwidth; every CU gets an equal share of the range (launch.split, at least
  16384 elements a CU), so a launch runs at the slowest CU's rate;
- compute lanes: at XCL_OPT 4 a pointwise member computes Kernel.compute_lanes elements a cycle
  (codegen/model.py: float32 ops outside COSTLY_OPS the whole word, the rest an eighth of it); below
  XCL_OPT 4 one element a cycle; a reduction folds one input word a cycle;
- whether it fits: resources.estimate (the build's fit check), which the GEMM's DSPs are judged by;
- kernel clock 300 MHz (Vitis' default for these platforms: the build's when freq= is not given);
- levels: 1 = sequential burst phases (read each input, compute, write: one element per cycle per
  phase), 2 = dataflow (one port word a cycle per master: one element below XCL_OPT 4), 3 = level
  2 on more CUs, 4 = 512-bit words through one dataflow region at II=1: one pipeline fill per call
  (FILL_CYCLES);
- reductions (kernels/hls/reduce, host/ps/fpga_reduce.cpp): "reduce" reduces rows
  (x.view(4096, -1).sum(1)): the runtime splits the rows over the CUs, and each row costs the fold
  its drain besides its words (reduce_run_cycles: the partials' trees, as the kernel writes them);
  "reduce_all" reduces everything to one value (x.sum()): the runtime splits the one row into a
  piece per CU (PARTIAL mode), then a second launch merges the pieces' partials (COMBINE: one merge
  per piece, ADD_LATENCY cycles each); "reduce_cols" reduces the rows of x.view(4096, -1) column by
  column (x.sum(0), COLUMNS mode): a row of at most COL_TILE words is one tile, and then each CU
  takes a block of whole rows and a second launch merges the CUs' partials (COMBINE: one partial a
  cycle); wider rows give each CU a block of columns, in tiles of COL_TILE words. Each row of a
  tile is one burst whose pipelined loop restarts (PIPELINE_FILL cycles), and each tile ends in a
  drain (the ring's copies merged, one output element per cycle);
- "resident": the operands already live in device memory (a chain of FPGA ops); "with transfers":
  the inputs are copied in and the output out over the host link (PCIe Gen3 x16, ~12 GB/s per
  direction measured; the embedded platform shares the host's memory, so it has no such copy);
- 15 us per kernel launch (XRT run start + wait).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, median_seconds, print_table, pyplot, save_plot, write_json  # noqa: E402

sys.path[:0] = [ROOT, os.path.join(ROOT, "site_scons")]  # the build's own plan (as SConstruct imports it)
from afpga import connectivity, platforms, resources, variables  # noqa: E402
from afpga.gen import KernelSource  # noqa: E402
from afpga.platforms import PLATFORMS  # noqa: E402
from codegen import engines as engines_  # noqa: E402
from codegen.abi import REDUCE_COLUMN_TILE, REDUCE_LANE_PARTIALS, REDUCE_PARTIAL_BYTES, REDUCE_PARTIALS  # noqa: E402
from codegen.gen_hls import generate_hls, template_env  # noqa: E402
from codegen.generate import add_engines  # noqa: E402
from codegen.interface import TopFunction  # noqa: E402
from codegen.plan import HLS_ROOT, interface_file, plan  # noqa: E402

CLOCK_HZ = 300e6  # the platforms' default kernel clock: the build's unless freq= (Config.freq) sets one
ELEMENT_BYTES = 4
LAUNCH_S = 15e-6
FILL_CYCLES = 256  # one dataflow pipeline fill per call: the first burst's latency and the op's depth
TABLE = os.path.join(ROOT, "native_functions_fpga.yaml")
# Each category's row: the float32 member that runs the op torch is timed on beside it.
CATEGORY_MEMBER = {"unary": "v_neg_float32", "binary": "v_add_float32", "ternary": "v_addcmul_float32",
                   "reduce": "v_sum_float32", "reduce_all": "v_sum_float32", "reduce_cols": "v_sum_float32"}
REDUCTIONS = ("reduce", "reduce_all", "reduce_cols")
# Pointwise members beside the rows' at XCL_OPT 4: costly functions and other dtypes, whose compute
# lanes are an eighth of the word's (codegen/model.py Kernel.compute_lanes).
MEMBERS = ("v_neg_float32", "v_exp_float32", "v_neg_float16", "v_add_float32", "v_div_float32", "v_add_float16",
           "v_addcmul_float32", "v_where_float32")
REDUCE_ROWS = 4096
# The reduce kernels' fold (kernels/hls/reduce): PARTIALS interleaved accumulators (per lane at
# XCL_OPT 4), combined at each run's (row's) end by balanced trees of merges. A merge of sums is a
# double-precision add: ADD_LATENCY cycles at 300 MHz (Vitis' full-DSP dadd), PIPELINE_FILL the
# words loop's read-convert-add depth.
ADD_LATENCY = 8
PIPELINE_FILL = 12
COL_TILE = REDUCE_COLUMN_TILE  # the COLUMNS mode's tile: port words of a row
MIN_ELEMENTS_PER_CU = 16384  # host/ps/launch.h kMinElementsPerCU


# --- the image: what the build puts on the card ----------------------------------------------------

@dataclass(frozen=True)
class Stream:
    """One port of a member as its engine binds it: the bundle (master) it uses, the engine
    argument (whose bank the link plan names), elements per port word and bytes per element."""
    arg: str
    bundle: str
    per_word: int
    bytes: float
    output: bool


@dataclass(frozen=True)
class Image:
    """The image the build makes at one level for one platform: its configuration (CUs, gemm_pe,
    clock), its members (codegen Kernels) and engines, the link plan and the resource estimate."""
    level: int
    config: variables.Config
    kernels: dict  # member name -> codegen.model.Kernel
    engines: dict  # category -> codegen.engines.Engine
    link: connectivity.LinkPlan
    fit: resources.Fit

    @property
    def platform(self):
        return self.config.platform

    @property
    def clock_hz(self) -> float:
        return self.config.freq * 1e6 if self.config.freq else CLOCK_HZ

    def cu_names(self, category: str) -> tuple[str, ...]:
        name = self.engines[category].name
        return next(names for top, names in self.link.kernels if top.name == name)

    def cus(self, category: str) -> int:
        return len(self.cu_names(category))

    def streams(self, member: str) -> tuple[Stream, ...]:
        """The member's ports that stream its range: all of a pointwise member's; a reduction's
        input (its outputs are one element a row and the partials)."""
        k = self.kernels[member]
        e = self.engines[k.op.category]
        bound = dict(next(m.args for m in e.members if m.kernel == member))
        args = {a.name: a for a in e.top.args}
        out = []
        for p in k.ports:
            if p.is_output and k.op.driver == "reduce":
                continue
            a = args[bound[p.name]]
            out.append(Stream(a.name, a.bundle, max(1, a.width // p.dtype.bits), p.dtype.bits / 8, p.is_output))
        return tuple(out)

    def bank(self, cu: str, arg: str) -> int:
        tag = self.link.banks[(cu, arg)]
        return next(i for i, b in enumerate(self.platform.banks) if b.tag == tag)

    def compute_lanes(self, member: str) -> int:
        """Elements the member computes a cycle: an XCL_OPT 4 pointwise member its compute lanes
        (codegen/model.py Kernel.compute_lanes); otherwise one input word a cycle (a reduction's
        fold; one element below XCL_OPT 4)."""
        k = self.kernels[member]
        if self.level == 4 and k.op.driver == "pointwise":
            return k.compute_lanes
        return min(s.per_word for s in self.streams(member) if not s.output)


@functools.lru_cache(maxsize=None)
def _rendered(level: int, wanted: tuple[str, ...], dtypes: tuple[str, ...]):
    """The image's members, the codegen's interface file for the level (rendered from the templates
    in memory, as `python -m codegen generate` writes it: every member's and engine's interface and
    each member's local arrays) and the engines that hold the members."""
    kernels = plan(TABLE, wanted, dtypes).kernels
    if not kernels:
        raise SystemExit(f"--kernels {','.join(wanted)} --dtypes {','.join(dtypes)} selects no kernel of "
                         f"{os.path.basename(TABLE)}: give categories or ops of kernels/hls and dtypes of the "
                         "table, as scons kernels= and dtypes= take them (`scons -h` lists both)")
    files = generate_hls(kernels, template_env(HLS_ROOT), (level,))
    add_engines(kernels, files, level)
    doc = json.loads(files[interface_file(level)])
    tops = {name: TopFunction.from_json(t) for name, t in doc["kernels"].items()}
    return kernels, doc, tops, engines_.engines(kernels, tops, level)


@functools.lru_cache(maxsize=None)
def image(level: int, platform, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = (),
          gemm_pe: tuple[int, int] | None = None) -> Image:
    """The image `scons target=hw opt=<level> platform=<platform> kernels=<wanted> dtypes=<dtypes>`
    builds (gemm_pe=: the GEMM's PE array, default the platform's)."""
    kernels, doc, tops, built = _rendered(level, wanted, dtypes)
    pe = gemm_pe or tuple(int(x) for x in platforms.gemm_pe_default(platform).split("x"))
    cfg = variables.Config("hw", level, wanted, dtypes, platform, variables.default_cus(level, platform), None, "", "",
                           pe, False)
    # The engines as the build describes them (site_scons/afpga/gen.py), for their CUs and the estimate.
    sources = tuple(KernelSource(e.name, e.category, "", e.source, "", tuple(
        KernelSource(k.name, e.category, k.dtype.name, k.source(level), k.op.name, (),
                     k.compute_lanes if level == 4 else 1) for k in kernels if k.op.category == e.category))
        for e in built)
    link = connectivity.plan([tops[e.name] for e in built], {s.name: cfg.engine_cus(s) for s in sources}, platform)
    fit = resources.estimate(link, sources, tops, level, pe, False, doc.get("memories"),
                             doc.get("datapaths"))  # as resources.fit_of
    return Image(level, cfg, {k.name: k for k in kernels}, {e.category: e for e in built}, link, fit)


def fit_summary(fit: resources.Fit) -> str:
    """Whether the build's estimate says the image fits: its fullest resource against the budget if
    it does, else its worst overflow (a resource in all, or one CU in one SLR)."""
    if fit.fits:
        have = {r: getattr(fit.capacity.left, r) * resources.BUDGET for r in resources.RESOURCES}
        use = {r: getattr(fit.total, r) / have[r] for r in resources.RESOURCES if have[r]}
        worst = max(use, key=use.get)
        return f"yes ({worst.upper()} {100 * use[worst]:.0f}%)"
    o = max(fit.overflows, key=lambda o: o.need / o.limit)
    return f"no ({o.what.split(' (')[0]} {100 * o.need / o.limit:.0f}%)"


def reduce_run_cycles(level: int, lanes: int) -> int:
    """The fold's cycles per run (a row) besides its words: the loop's fill and the drain. XCL_OPT 4
    keeps REDUCE_LANE_PARTIALS accumulators per float32 lane (`lanes` of them a word) and merges
    them pairwise a word a cycle (PARTIALS - 1 words over log2(PARTIALS) levels, each a merge
    latency), then partial 0's lanes by a tree; the other levels keep REDUCE_PARTIALS accumulators
    and combine them in one tree."""
    partials = REDUCE_LANE_PARTIALS if level == 4 else REDUCE_PARTIALS
    depth = partials.bit_length() - 1  # log2: a tree's merges from leaf to root
    if level == 4:
        lanes_depth = lanes.bit_length() - 1
        return PIPELINE_FILL + partials + (lanes_depth + depth) * ADD_LATENCY
    return PIPELINE_FILL + depth * ADD_LATENCY

# Physical limits, beside the projections.
PCIE_GEN3_X16_GBPS = 15.75  # theoretical, per direction
PCIE_MEASURED_GBPS = 12.0   # what XRT's DMA reaches in practice (Platform.host_link_gbps)
# Board power (W): the cards' maximum, from AMD's data sheets; the ZCU102 is an evaluation board
# with no such figure.
BOARD_WATTS = {"u200": 225, "u250": 225, "u50": 75, "u55c": 150, "u280": 225}
# This machine's CPU: lscpu says "AMD EPYC", family 25 model 1 (Zen 3, Milan) under KVM, without its
# SKU. Milan's package TDPs run 155-280 W; we take the top part's (EPYC 7763, 280 W) as the
# package power: a TDP, not a measurement, and our 2 vCPUs are a slice of that package.
CPU = {"name": "AMD EPYC (Zen 3 Milan, family 25 model 1; SKU hidden by KVM)", "tdp_w": 280,
       "tdp_source": "EPYC 7763 TDP 280 W (top Milan SKU; assumed, not measured)"}
# An H100 SXM measured on the same ops at 2^24 float32; its 700 W board power (TDP) as its power.
H100 = {"name": "H100 SXM", "tdp_w": 700, "n": 1 << 24, "ms": {"binary": 0.0725, "reduce_all": 0.034},
        "ops": {"binary": "add", "reduce_all": "sum"}}


def peak_gbps(platform) -> float:
    """The card's peak memory bandwidth: its banks together (the Zynq's HP ports share one DDR)."""
    return 19.2 if platform.embedded else len(platform.banks) * platform.bank_gbps


def input_lanes(img: Image, member: str) -> int:
    """Elements per word of the member's (first) input port."""
    return next(s.per_word for s in img.streams(member) if not s.output)


def reduce_cus(category: str, img: Image, member: str, n: int) -> tuple[int, int]:
    """CUs a reduction of n elements runs on, as host/ps/fpga_reduce.cpp splits it over the reduce
    engine's CUs, and the words (items) of a row each CU streams at a time: its row (piece) or its
    column tile's width."""
    lanes = input_lanes(img, member)
    cus = min(img.cus(img.kernels[member].op.category), max(1, n // MIN_ELEMENTS_PER_CU))
    if category == "reduce":
        return min(cus, REDUCE_ROWS), -(-n // REDUCE_ROWS // lanes)
    if category == "reduce_all":
        return cus, -(-n // cus // lanes)
    words = -(-n // REDUCE_ROWS // lanes)  # reduce_cols: words per row
    if cols_split_rows(words, cus):
        return cus, words
    cus = min(cus, words)
    return cus, min(COL_TILE, -(-words // cus))


def cols_split_rows(words: int, cus: int) -> bool:
    """Whether the runtime gives each CU a block of whole rows of reduce_cols' [REDUCE_ROWS, words]
    (host/ps/fpga_reduce.cpp): the columns are fewer than the CUs, or a row is one tile and the
    combine (one CU, a partial per column per CU) takes under an eighth of the fold's time."""
    rows_are_tiles = words <= COL_TILE and REDUCE_ROWS * ELEMENT_BYTES >= 8 * cus * cus * REDUCE_PARTIAL_BYTES
    return REDUCE_ROWS >= 2 * cus and (words < cus or rows_are_tiles)


def bank_shares(img: Image, category: str, cus: int, streams) -> list[dict[str, float]]:
    """For each of the launch's first `cus` CUs of the engine: each streaming bundle's share of its
    bank's peak (bytes/s), the bank split evenly between the launch's masters on it."""
    names = img.cu_names(category)[:cus]
    bundle_arg = {s.bundle: s.arg for s in streams}
    load = Counter(img.bank(cu, arg) for cu in names for arg in bundle_arg.values())
    bank_bps = img.platform.bank_gbps * 1e9
    return [{b: bank_bps / load[img.bank(cu, arg)] for b, arg in bundle_arg.items()} for cu in names]


def throughput(category: str, level: int, platform, n: int, member: str | None = None,
               img: Image | None = None) -> tuple[float, int, str]:
    """Elements per second one launch of `member` (default: the category's row) streams, the CUs it
    uses, and what bounds it: compute, a master's port (one word a cycle, shared by the streams on
    it), the banks, or the Zynq's PS DDR."""
    img = img or image(level, platform)
    member = member or CATEGORY_MEMBER[category]
    engine = img.kernels[member].op.category
    streams = img.streams(member)
    clock = img.clock_hz
    if category in REDUCTIONS:
        cus, width = reduce_cus(category, img, member, n)
    else:
        cus = min(img.cus(engine), max(1, n // MIN_ELEMENTS_PER_CU))  # launch.h: >= 16384 per CU
    # Cycles per element: each master's (its streams' words, one a cycle) and the datapath's.
    port_cycles: dict[str, float] = {}
    port_bytes: dict[str, float] = {}
    for s in streams:
        port_cycles[s.bundle] = port_cycles.get(s.bundle, 0.0) + 1 / s.per_word
        port_bytes[s.bundle] = port_bytes.get(s.bundle, 0.0) + s.bytes
    compute = 1 / img.compute_lanes(member)
    if category in ("reduce", "reduce_all"):
        compute *= (width + reduce_run_cycles(level, input_lanes(img, member))) / width  # a drain per row (piece)
    elif category == "reduce_cols":
        compute *= (width + PIPELINE_FILL) / width  # each row of a tile restarts the burst loop
    # Per CU, elements/s under each limit; a tie names the memory, then the port.
    if level == 1:  # the phases in turn: each input read, the compute, each output written
        limits_ = {"compute": clock / (sum(port_cycles.values()) + compute)}
    else:
        limits_ = {"compute": clock / compute}
        for b, c in port_cycles.items():
            limits_[f"{'read' if b == engines_.READ_BUNDLE else 'write'} port"] = clock / c
    shares = bank_shares(img, engine, cus, streams)
    limits_["memory banks"] = min(share[b] / port_bytes[b] for share in shares for b in share)
    if platform.embedded:  # the HP ports all reach the same PS DDR
        limits_["memory (PS DDR)"] = peak_gbps(platform) * 1e9 / (cus * sum(port_bytes.values()))
    order = ["memory (PS DDR)", "memory banks", "read port", "write port", "compute"]
    bound = min(limits_, key=lambda k: (limits_[k], order.index(k)))
    return cus * limits_[bound], cus, bound


def extra_seconds(category: str, level: int, platform, n: int, img: Image | None = None) -> float:
    """Time a launch spends besides streaming: reduce_all's combine (a second launch merging one
    partial per CU), reduce_cols' per-tile fill, clear and drain."""
    if category not in REDUCTIONS:
        return 0.0
    img = img or image(level, platform)
    member = CATEGORY_MEMBER[category]
    cus, width = reduce_cus(category, img, member, n)
    if category == "reduce_all" and cus > 1:
        return LAUNCH_S + (FILL_CYCLES + cus * ADD_LATENCY) / img.clock_hz
    if category == "reduce_cols":
        lanes = input_lanes(img, member)
        words = -(-n // REDUCE_ROWS // lanes)
        ring = width * -(-REDUCE_PARTIALS // width)
        drain = COL_TILE + (ring - width) * ADD_LATENCY + width * lanes  # clear, copies, one store a cycle
        if cols_split_rows(words, cus):  # one tile per CU, then the combine of a partial per column per CU
            combine = LAUNCH_S + (FILL_CYCLES + cus * (n // REDUCE_ROWS)) / img.clock_hz
            return (FILL_CYCLES + drain) / img.clock_hz + combine
        tiles = -(-(-(-words // cus)) // width)  # tiles per CU
        return tiles * (FILL_CYCLES + drain) / img.clock_hz
    return 0.0


def device_seconds(category: str, img: Image, n: int, member: str | None = None) -> dict:
    """One resident launch of `member` (default: the category's row) on n elements: its streaming
    rate (elements/s), CUs and bound, its seconds, and the bytes it moves through the card's memory."""
    member = member or CATEGORY_MEMBER[category]
    rate, cus, bound = throughput(category, img.level, img.platform, n, member, img)
    seconds = n / rate + FILL_CYCLES / img.clock_hz + LAUNCH_S
    seconds += extra_seconds(category, img.level, img.platform, n, img)
    return {"rate": rate, "cus": cus, "bound": bound, "seconds": seconds,
            "moved": n * sum(s.bytes for s in img.streams(member))}


def cpu_seconds(n: int) -> dict[str, float]:
    """torch's CPU time per category at n elements, measured in this run."""
    import torch

    a, b, c = torch.rand(n), torch.rand(n), torch.rand(n)
    rows = a.view(REDUCE_ROWS, -1)
    return {"unary": median_seconds(lambda: torch.neg(a), 5), "binary": median_seconds(lambda: a + b, 5),
            "ternary": median_seconds(lambda: torch.addcmul(a, b, c), 5),
            "reduce": median_seconds(lambda: rows.sum(1), 5), "reduce_all": median_seconds(lambda: a.sum(), 5),
            "reduce_cols": median_seconds(lambda: rows.sum(0), 5)}


def model(n: int, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()) -> list[dict]:
    cpu = cpu_seconds(n)
    rows = []
    for category, member in CATEGORY_MEMBER.items():
        for level in (1, 2, 3, 4):
            for p in PLATFORMS.values():
                img = image(level, p, wanted, dtypes)
                if member not in img.kernels:
                    continue
                d = device_seconds(category, img, n)
                resident, moved = d["seconds"], d["moved"]
                # With transfers, the same bytes cross the host link (inputs in, outputs out).
                transfers = resident + (moved / (p.host_link_gbps * 1e9) if p.host_link_gbps else 0.0)
                gbps = moved / resident / 1e9
                watts = BOARD_WATTS.get(p.alias)
                rows.append({"category": category, "member": member, "level": level, "platform": p.alias,
                             "cus": d["cus"], "gelem_per_s": d["rate"] / 1e9, "bound": d["bound"],
                             "device_ms": resident * 1e3,
                             "gbps": gbps, "peak_gbps": peak_gbps(p), "percent_of_peak": 100 * gbps / peak_gbps(p),
                             "with_transfers_ms": transfers * 1e3, "cpu_ms": cpu[category] * 1e3,
                             "speedup_resident": cpu[category] / resident,
                             "speedup_with_transfers": cpu[category] / transfers,
                             # what the card's memory peak alone would allow against this CPU
                             "speedup_ceiling": cpu[category] / (moved / (peak_gbps(p) * 1e9)),
                             "board_w": watts, "energy_mj": watts * resident * 1e3 if watts else None,
                             "cpu_energy_mj": CPU["tdp_w"] * cpu[category] * 1e3})
    return rows


def energy_rows(rows: list[dict], n: int) -> list[dict]:
    """Energy per op at opt=4 beside the CPU's (TDP x its time) and the H100's (TDP x measured time)."""
    out = []
    for category in ("binary", "reduce_all"):
        pts = [r for r in rows if r["category"] == category and r["level"] == 4 and r["board_w"]]
        if not pts:  # the image (--kernels, --dtypes) has no such member
            continue
        for r in pts:
            out.append({"category": category, "device": r["platform"] + " opt=4", "watts": r["board_w"],
                        "ms": r["device_ms"], "mj": r["energy_mj"], "kind": "projected"})
        cpu_ms = pts[0]["cpu_ms"]
        out.append({"category": category, "device": "this CPU (torch)", "watts": CPU["tdp_w"], "ms": cpu_ms,
                    "mj": CPU["tdp_w"] * cpu_ms, "kind": "measured time x TDP"})
        if n == H100["n"]:
            ms = H100["ms"][category]
            out.append({"category": category, "device": H100["name"], "watts": H100["tdp_w"], "ms": ms,
                        "mj": H100["tdp_w"] * ms, "kind": "measured time x TDP"})
    return out


def limits(wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()) -> list[list]:
    """The physical limits the projections sit under, and the opt=4 image's plan: CUs of each
    streaming engine, the GEMM engine's CUs and PE array, and whether the estimate says it fits."""
    out = []
    for p in PLATFORMS.values():
        img = image(4, p, wanted, dtypes)
        kind = "PS DDR4 (HP ports)" if p.embedded else f"{p.banks[0].kind} {len(p.banks)} x {p.bank_gbps:.2f} GB/s"
        streaming = sorted({img.cus(c) for c in img.engines if c in variables.STREAMING})
        gemm = f"{img.cus('gemm')} x {'x'.join(map(str, img.config.gemm_pe))}" if "gemm" in img.engines else "-"
        out.append([p.alias, kind, peak_gbps(p), PCIE_GEN3_X16_GBPS if p.host_link_gbps else None,
                    p.host_link_gbps, "/".join(map(str, streaming)) or "-", gemm, fit_summary(img.fit)])
    return out


def members_model(n: int, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()) -> list[dict]:
    """MEMBERS at XCL_OPT 4 on every platform: what their compute lanes leave of the memory's peak."""
    rows = []
    for member in MEMBERS:
        for p in PLATFORMS.values():
            img = image(4, p, wanted, dtypes)
            if member not in img.kernels:
                continue
            k = img.kernels[member]
            d = device_seconds(k.op.category, img, n, member)
            gbps = d["moved"] / d["seconds"] / 1e9
            rows.append({"member": member, "engine": img.engines[k.op.category].name, "platform": p.alias,
                         "compute_lanes": img.compute_lanes(member), "word_lanes": k.lanes, "cus": d["cus"],
                         "gelem_per_s": d["rate"] / 1e9, "bound": d["bound"], "device_ms": d["seconds"] * 1e3,
                         "gbps": gbps, "percent_of_peak": 100 * gbps / peak_gbps(p)})
    return rows


# --- CNN layers: im2col + GEMM against a direct convolution, and pooling -------------------------
# A convolution as im2col + GEMM: im2col walks one col element per cycle at XCL_OPT 1-3 and 16 at
# XCL_OPT 4 (kernels/hls/im2col), and
# writes the col matrix ([C*K, N*OH*OW]) to device memory; the GEMM reads it back. A direct
# convolution reads the input once but needs its own MAC array. Both use the XCL_OPT 4 GEMM's PE
# array (the build's gemm_pe for the card): its cycles for an m x n x k product are those of the
# kernel as written -- per c tile, the row blocks that hold rows of c, each k * IL cycles -- so a
# product with few rows (a convolution's Cout) uses a fraction of the array. The GEMM streams its
# operands from one bank each. Pooling walks one window element per cycle per CU. Backward: two GEMMs (grad_input
# through col2im, grad_weight through a fresh im2col) for the convolution, one window walk for pooling.


def pe_array_seconds(m: int, n: int, k: int, platform) -> float:
    """Seconds of the XCL_OPT 4 GEMM kernel's compute for one m x n x k product (kernels/hls/gemm/opt4:
    TM = PM * SM rows and TN = PN * IL columns a tile; a tile runs its row blocks that hold rows of
    c, each taking k * IL cycles)."""
    pm, pn = image(4, platform).config.gemm_pe
    tm, tn = pm * GEMM_SM, pn * GEMM_IL
    blocks = (m // tm) * GEMM_SM + -(-(m % tm) // pm)  # row blocks over all row tiles
    return blocks * -(-n // tn) * k * GEMM_IL / CLOCK_HZ


def cnn_layers() -> list[dict]:
    """The convolution and pooling layers of the LeNet-5 step (batch 32) and a ResNet BasicBlock
    (batch 8, 56x56): (model, layer, kind, N, C, H, W, Cout, k, stride, padding)."""
    def layer(model, name, kind, n, c, h, w, cout, k, s=1, p=0):
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        return {"model": model, "layer": name, "kind": kind, "n": n, "c": c, "h": h, "w": w, "cout": cout,
                "k": k, "stride": s, "padding": p, "oh": oh, "ow": ow}
    return [layer("LeNet-5", "conv1 5x5 1->6", "conv", 32, 1, 28, 28, 6, 5),
            layer("LeNet-5", "pool1 2x2", "pool", 32, 6, 24, 24, 6, 2, 2),
            layer("LeNet-5", "conv2 5x5 6->16", "conv", 32, 6, 12, 12, 16, 5),
            layer("LeNet-5", "pool2 2x2", "pool", 32, 16, 8, 8, 16, 2, 2),
            layer("ResNet block", "conv 3x3 64->64", "conv", 8, 64, 56, 56, 64, 3, 1, 1)]


def cnn_layer_seconds(l: dict, platform, method: str) -> float:
    """Projected forward + backward seconds of one layer on `platform`: method "im2col+gemm" (the
    walk at XCL_OPT 1-3: one col element per cycle), "im2col16+gemm" (XCL_OPT 4: 16 lanes),
    "direct" (convolutions) or "pool"."""
    bank = platform.bank_gbps * 1e9
    pix = l["n"] * l["oh"] * l["ow"]
    if l["kind"] == "pool":
        walk = pix * l["c"] * l["k"] ** 2 / CLOCK_HZ  # one window element per cycle, forward
        return 2 * walk + 4 * LAUNCH_S  # backward walks the windows again
    ck = l["c"] * l["k"] ** 2
    # forward: [Cout x C*K] @ [C*K x pixels]; grad_weight: [Cout x pixels] @ [pixels x C*K]; grad_input:
    # [C*K x Cout] @ [Cout x pixels] -- a third of the layer's GEMM time each, as the formula below counts it.
    gemm = (pe_array_seconds(l["cout"], pix, ck, platform) + pe_array_seconds(l["cout"], ck, pix, platform)
            + pe_array_seconds(ck, pix, l["cout"], platform)) / 3
    image = l["n"] * l["c"] * l["h"] * l["w"] * ELEMENT_BYTES
    out = pix * l["cout"] * ELEMENT_BYTES
    if method == "direct":  # reads the image, writes the output: one pass per GEMM-equivalent
        return 3 * max(gemm, (image + out) / bank) + 3 * LAUNCH_S
    col = pix * l["c"] * l["k"] ** 2
    lanes = 16 if method == "im2col16+gemm" else 1
    walk = max(col / (lanes * CLOCK_HZ), col * ELEMENT_BYTES / bank)  # im2col writes col
    gemm_io = max(gemm, (col * ELEMENT_BYTES + out) / bank)  # the GEMM streams col back
    # forward: im2col + GEMM; backward: im2col + GEMM (grad_weight), GEMM + col2im (grad_input).
    return 3 * walk + 3 * gemm_io + 6 * LAUNCH_S


def cnn_cpu_seconds(l: dict) -> float:
    """torch's CPU time of the layer's forward + backward on this machine."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(l["n"], l["c"], l["h"], l["w"], requires_grad=True)
    if l["kind"] == "pool":
        fn = lambda: F.max_pool2d(x, l["k"], l["stride"]).sum().backward()  # noqa: E731
    else:
        w = torch.randn(l["cout"], l["c"], l["k"], l["k"], requires_grad=True)
        fn = lambda: F.conv2d(x, w, None, l["stride"], l["padding"]).sum().backward()  # noqa: E731
    return median_seconds(fn, 3)


def cnn_model(platforms=("u250", "u55c")) -> list[dict]:
    by_alias = {p.alias: p for p in PLATFORMS.values()}
    rows = []
    for l in cnn_layers():
        cpu = cnn_cpu_seconds(l)
        for alias in platforms:
            for method in (("pool",) if l["kind"] == "pool" else ("im2col+gemm", "im2col16+gemm", "direct")):
                t = cnn_layer_seconds(l, by_alias[alias], method)
                rows.append({"model": l["model"], "layer": l["layer"], "platform": alias, "method": method,
                             "device_ms": t * 1e3, "cpu_ms": cpu * 1e3, "speedup": cpu / t})
    return rows


def cnn_main(json_path: str) -> None:
    rows = cnn_model()
    print(f"CNN layers, forward + backward, projected (GEMM: the XCL_OPT 4 PE array at {CLOCK_HZ / 1e6:.0f} MHz)")
    print_table(["model", "layer", "platform", "method", "device ms", "cpu ms", "x cpu"],
                [[r["model"], r["layer"], r["platform"], r["method"], r["device_ms"], r["cpu_ms"], r["speedup"]]
                 for r in rows])
    write_json(json_path, {"benchmark": "perf_model_cnn", "machine": machine(), "clock_hz": CLOCK_HZ,
                           "launch_s": LAUNCH_S, "rows": rows})
    plt = pyplot()
    if plt is None:
        return
    layers = list(dict.fromkeys((r["model"], r["layer"]) for r in rows))
    series = list(dict.fromkeys((r["platform"], r["method"]) for r in rows if r["method"] != "pool"))
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / (len(series) + 1)
    for i, (alias, method) in enumerate(series + [("cpu", "torch")]):
        ys = []
        for model, layer in layers:
            pts = [r for r in rows if r["model"] == model and r["layer"] == layer]
            if alias == "cpu":
                ys.append(pts[0]["cpu_ms"])
            else:
                pick = [r for r in pts if r["platform"] == alias and r["method"] in (method, "pool")]
                ys.append(pick[0]["device_ms"])
        ax.bar([j + i * width for j in range(len(layers))], ys, width,
               label=f"{alias} {method}" if alias != "cpu" else "this CPU (torch)")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(layers))])
    ax.set_xticklabels([f"{m}\n{l}" for m, l in layers], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms, forward + backward")
    ax.set_title("CNN layers: projected device time (pool layers: the window walk) vs torch on this CPU")
    ax.legend(fontsize=7)
    save_plot(fig, "cnn_layers.png")


# --- FFT (kernels/hls/fft) -------------------------------------------------------------------------
# Anchor: AMD's Vitis DSP library 1-D SSR FFT on a U250, 1024-point float32 at SSR 8, 367.6 MHz:
# 2.92 GSa/s (about 146 GFLOP/s counted as 5 N log2 N per transform).
FFT_ANCHOR = {"name": "Vitis DSP SSR FFT (U250, SSR 8, 367.6 MHz)", "gsa_per_s": 2.92}
FFT_SSR = 8  # samples per cycle of the opt=4 kernel's wide stages and ports


def fft_row_cycles(n: int, level: int) -> float:
    """Cycles one compute unit spends per row of n points, as the templates are written."""
    log2n = n.bit_length() - 1
    if level == 1:  # load, log2n stages of n/2 butterflies, store: in turn, one op a cycle
        return n + log2n * n / 2 + n
    if level in (2, 3):  # a pipeline of stage processes, each holding the row: fill n, emit n
        return 2 * n
    # opt=4: the transform process fills n/8 words, runs its radix-4 stages (8 butterflies a
    # cycle) and a radix-2 stage for odd log2n, then emits n/8 words; read and write overlap it
    # under DATAFLOW, fill and emit do not (one row buffer).
    cycles, length = n / FFT_SSR * 2, n
    while length >= 4:
        cycles += n / 4 / FFT_SSR
        length //= 4
    if length == 2:
        cycles += n / 2 / FFT_SSR
    return cycles


def fft_model(n: int = 1024, batch: int = 4096, aliases=("u250", "u55c")) -> list[dict]:
    """Projected batched-FFT throughput per platform and level on the fft engine's CUs: compute (the
    row cycles above) or memory (a complex64 sample read on one master and written on the other,
    a port word a cycle each, within its bank's share) bound, whichever is lower."""
    by_alias = {p.alias: p for p in PLATFORMS.values()}
    rows = []
    for alias in aliases:
        plat = by_alias[alias]
        for level in (1, 2, 3, 4):
            img = image(level, plat)
            cus = img.cus("fft")
            streams = img.streams("v_fft_complex64")
            compute = cus * img.clock_hz * n / fft_row_cycles(n, level)  # samples / s
            per_cu = min(min(img.clock_hz * s.per_word, share[s.bundle] / s.bytes)
                         for share in bank_shares(img, "fft", cus, streams) for s in streams)
            memory = cus * per_cu
            sa = min(compute, memory)
            seconds = batch * n / sa + LAUNCH_S
            rows.append({"platform": alias, "level": level, "n": n, "batch": batch, "gsa_per_s": sa / 1e9,
                         "gflops": 5 * n * (n.bit_length() - 1) / n * sa / 1e9,
                         "bound": "compute" if compute <= memory else "memory", "device_ms": seconds * 1e3})
    return rows


def fft_main(json_path: str) -> None:
    rows = fft_model()
    print(f"batched 1024-point complex64 FFT (batch 4096), projected at {CLOCK_HZ / 1e6:.0f} MHz; anchor: "
          f"{FFT_ANCHOR['name']} {FFT_ANCHOR['gsa_per_s']} GSa/s")
    print_table(["platform", "opt", "GSa/s", "GFLOP/s", "bound", "device ms", "x anchor"],
                [[r["platform"], r["level"], r["gsa_per_s"], r["gflops"], r["bound"], r["device_ms"],
                  r["gsa_per_s"] / FFT_ANCHOR["gsa_per_s"]] for r in rows])
    write_json(json_path, {"benchmark": "perf_model_fft", "machine": machine(), "clock_hz": CLOCK_HZ,
                           "anchor": FFT_ANCHOR, "rows": rows})
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels = [f"{r['platform']}\nopt={r['level']}" for r in rows] + ["Vitis SSR FFT\nU250 (anchor)"]
    values = [r["gsa_per_s"] for r in rows] + [FFT_ANCHOR["gsa_per_s"]]
    ax.bar(range(len(values)), values, color=["C0"] * len(rows) + ["C3"])
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("GSa/s (1024-point complex64)")
    ax.set_title("Batched FFT: projected throughput per level beside the Vitis SSR FFT")
    save_plot(fig, "fft_model.png")



# --- GEMM: c = a @ b, n x n x n float32 (kernels/hls/gemm) ---------------------------------------
# Anchors, float32, published: AutoSA's systolic array on a U250 at 300 MHz with 8,320 DSPs, and
# gemm_hls (Vitis HLS, one CU) on a VU9P (the U200/U250 family's die).
GEMM_ANCHORS = [("AutoSA, U250", 938.7, 8320), ("gemm_hls, VU9P", 301.0, None)]
GEMM_N = 4096
GEMM_TILE_1_3 = (64, 64, 64)  # TM, TN, TK of kernels/hls/gemm/opt1-3
GEMM_IL, GEMM_SM, GEMM_TK4 = 8, 8, 64  # opt4: accumulators per PE, PE row blocks per tile, k chunk


GEMM_MEMBER = "v_gemm_float32"


def gemm_design(level: int, platform, pe: tuple[int, int] | None = None, wanted: tuple[str, ...] = (),
                dtypes: tuple[str, ...] = ()) -> dict:
    """The GEMM engine of the image at `level` on `platform` (gemm_pe= `pe`, default the platform's):
    float32 MACs per cycle per CU, CUs, tile, port lanes, and its DSPs against what the rest of the
    image leaves of the budget (resources.estimate: the engine holds a PE array per member dtype)."""
    img = image(level, platform, wanted, dtypes, pe)
    lanes = input_lanes(img, GEMM_MEMBER)
    if level == 4:
        pm, pn = img.config.gemm_pe
        macs, tile = pm * pn, (pm * GEMM_SM, pn * GEMM_IL, GEMM_TK4)
    else:
        pm = pn = None
        macs, tile = 1, GEMM_TILE_1_3
    dsps = next(k.total.dsp for k in img.fit.kernels if k.category == "gemm")
    budget = img.fit.capacity.left.dsp * resources.BUDGET
    rest = img.fit.total.dsp - dsps
    return {"pe": f"{pm}x{pn}" if pm else "1", "macs": macs, "cus": img.cus("gemm"), "tile": tile, "lanes": lanes,
            "members": sum(1 for k in img.kernels.values() if k.op.category == "gemm"),
            "dsps": dsps, "dsp_fraction": dsps / platforms.DSPS[platform.alias], "dsp_budget": budget,
            "dsp_rest": rest, "dsp_left": budget - rest, "fits_dsps": dsps <= budget - rest,
            "image_fits": img.fit.fits, "image_fit": fit_summary(img.fit)}


def gemm_throughput(level: int, platform, n: int = GEMM_N, pe: tuple[int, int] | None = None,
                    wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()) -> dict:
    """Projected GFLOP/s of one n x n x n float32 product, resident in device memory.

    Per CU and output tile (TM x TN, k in TK chunks): compute takes ceil(n/TK) * TK * TM * TN / MACs
    cycles (edges padded to whole tiles) plus the stage's own fills and drains; level 1 adds its
    load phases (each chunk's a and b tiles, one element per cycle, not overlapped) and the store;
    levels 2-4 overlap loads, compute and store, so a tile takes the longest of them. Memory: each
    tile reads n * (TM + TN) elements, a and b both on the engine's read master (one port word a
    cycle between them, within its bank's share), and writes TM * TN on the write master."""
    d = gemm_design(level, platform, pe, wanted, dtypes)
    img = image(level, platform, wanted, dtypes, pe)
    clock = img.clock_hz
    tm, tn, tk = d["tile"]
    tiles = -(-n // tm) * -(-n // tn)
    chunks = -(-n // tk)
    # Compute-stage cycles per tile: the multiply-adds, plus the kernel's unoverlapped work. At
    # levels 1-3: clearing and draining the accumulators (TM * TN each) and, at 2-3, filling the
    # local a and b tiles from the streams before each chunk. At 4 the next chunk's words land
    # during the current chunk: only the first fill and the drain (a word per cycle) remain.
    mac = chunks * tk * tm * tn / d["macs"]
    if level == 4:
        compute = mac + max(tm * tk, tk * tn) / d["lanes"] + tm * tn / d["lanes"]
    else:
        compute = mac + 2 * tm * tn + (chunks * (tm * tk + tk * tn) if level in (2, 3) else 0)
    # Bytes/s of each master of the slowest CU: a port word a cycle, within its bank's share.
    streams = img.streams(GEMM_MEMBER)
    shares = bank_shares(img, "gemm", d["cus"], streams)
    port = {b: min(min(share[b] for share in shares), d["lanes"] * ELEMENT_BYTES * clock) for b in shares[0]}
    read_ab = n * (tm + tn) * ELEMENT_BYTES / port[engines_.READ_BUNDLE]  # seconds per tile: a and b share it
    write_c = tm * tn * ELEMENT_BYTES / port[engines_.WRITE_BUNDLE]
    if level == 1:
        loads = chunks * (tm * tk + tk * tn) + tm * tn  # the a/b loads and the store, in turn
        per_tile = (compute + loads) / clock
        bound = "compute + load phases"
    else:
        per_tile = max(compute / clock, read_ab, write_c)
        bound = "compute" if per_tile == compute / clock else "read port/bank" if per_tile == read_ab else \
            "write port/bank"
    bound = bound if level == 1 or mac / compute > 0.9 else bound + " (fills)"
    seconds = -(-tiles // d["cus"]) * per_tile
    if platform.embedded:  # every CU's a, b and c traffic through the one PS DDR
        ddr_s = tiles * (n * (tm + tn) + tm * tn) * ELEMENT_BYTES / (peak_gbps(platform) * 1e9)
        if ddr_s > seconds:
            seconds, bound = ddr_s, "memory (PS DDR)"
    seconds += LAUNCH_S
    return dict(d, level=level, platform=platform.alias, n=n, gflops=2 * n ** 3 / seconds / 1e9,
                peak_gflops=2 * d["macs"] * d["cus"] * clock / 1e9, bound=bound, seconds=seconds)


def gemm_model(n: int = GEMM_N, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = (),
               pe: tuple[int, int] | None = None) -> list[dict]:
    return [gemm_throughput(level, p, n, pe, wanted, dtypes) for level in (1, 2, 3, 4) for p in PLATFORMS.values()
            if "gemm" in image(level, p, wanted, dtypes, pe).engines]


def gemm_report(n: int = GEMM_N, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = (),
                pe: tuple[int, int] | None = None, plots: bool = True) -> list[dict]:
    """Prints the GEMM projection and plots it beside the anchors (docs/img/gemm_model.png)."""
    rows = gemm_model(n, wanted, dtypes, pe)
    if not rows:
        return rows
    print(f"\nGEMM: projected float32 GFLOP/s for {n} x {n} x {n}, resident, {CLOCK_HZ / 1e6:.0f} MHz; DSPs of the "
          f"GEMM engine ({rows[0]['members']} member(s), one PE array a CU that they share) against the budget "
          f"({100 * resources.BUDGET:.0f}% of what the shell leaves) less the rest of the image")
    print_table(["platform", "opt", "PEs", "CUs", "DSPs", "% card", "rest", "left", "fits left", "GFLOP/s", "peak",
                 "bound", "image fits (worst)"],
                [[r["platform"], r["level"], r["pe"], r["cus"], round(r["dsps"]), 100 * r["dsp_fraction"],
                  round(r["dsp_rest"]), round(r["dsp_left"]), "yes" if r["fits_dsps"] else "no", r["gflops"],
                  r["peak_gflops"], r["bound"], r["image_fit"]] for r in rows])
    plt = pyplot() if plots else None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7.5, 4))
        opt4 = [r for r in rows if r["level"] == 4]
        labels = [f"{r['platform']} opt=4\n{r['pe']} PEs" for r in opt4] + [a[0].replace(", ", "\n") for a in GEMM_ANCHORS]
        values = [r["gflops"] for r in opt4] + [a[1] for a in GEMM_ANCHORS]
        colors = ["tab:blue" if r["fits_dsps"] else "tab:orange" for r in opt4] + ["tab:grey"] * len(GEMM_ANCHORS)
        ax.bar(labels, values, color=colors)
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
        for i, r in enumerate(opt4):
            ax.text(i, 0, f"{r['dsps']:.0f} DSP\n{max(r['dsp_left'], 0):.0f} left", ha="center", va="bottom",
                    fontsize=6, color="white")
        ax.axhline(700, color="red", lw=0.8, ls="--", label="target: 700 GFLOP/s on a U250")
        ax.set_ylabel("float32 GFLOP/s")
        ax.set_title(f"GEMM {n}^3: projected at opt=4 (blue: its DSPs fit what the rest of the image leaves,\n"
                     "orange: they do not) vs published (grey)", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=8)
        save_plot(fig, "gemm_model.png")
    return rows


def compile_main(json_path: str, measured: str, platform: str = "u250") -> None:
    """A training step's launch and memory time on a card, eager against fused, from the launches
    and device bytes bench_compile.py counted per step: each launch costs LAUNCH_S and the bytes
    stream through one 512-bit port at the clock, capped by one bank. The GEMMs' compute, the same
    in both, is left out: the difference is what fusion saves. The convolutions' compute is not the
    same: eager's run on the GEMM kernel's PE array (their multiply-adds at PM x PN per cycle), the
    compiled step's on the conv kernels (the cycles they take as written, conv.work)."""
    from afpga.platforms import ALIASES

    plat = PLATFORMS[ALIASES.get(platform, platform)]
    pm, pn = image(4, plat).config.gemm_pe
    with open(measured, encoding="utf-8") as f:
        steps = json.load(f)["rows"]
    rate = min(CLOCK_HZ * 64, plat.bank_gbps * 1e9)  # bytes/s through one port
    rows = []
    for r in steps:
        eager_conv = r.get("conv_macs", 0) / (pm * pn) / CLOCK_HZ
        fused_conv = r.get("conv_kernel_cycles", 0) / CLOCK_HZ
        eager = r["eager_launches"] * LAUNCH_S + r["eager_kernel_bytes"] / rate + eager_conv
        fused = r["compiled_launches"] * LAUNCH_S + r["compiled_kernel_bytes"] / rate + fused_conv
        rows.append({"model": r["model"], "platform": plat.alias, "eager_ms": eager * 1e3, "fused_ms": fused * 1e3,
                     "eager_conv_ms": eager_conv * 1e3, "fused_conv_ms": fused_conv * 1e3, "speedup": eager / fused})
    print(f"projected launch + memory (+ convolution compute) time of one training step on {platform} (from {measured})")
    print_table(["model", "platform", "eager ms", "fused ms", "conv eager ms", "conv fused ms", "x"],
                [[r["model"], r["platform"], r["eager_ms"], r["fused_ms"], r["eager_conv_ms"], r["fused_conv_ms"],
                  r["speedup"]] for r in rows])
    write_json(json_path, {"benchmark": "perf_model_compile", "machine": machine(), "launch_s": LAUNCH_S,
                           "bytes_per_s": rate, "rows": rows})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1 << 24, help="elements per op (float32)")
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "perf_model.json"))
    p.add_argument("--cnn", action="store_true", help="the CNN layers' model instead (cnn_main)")
    p.add_argument("--fft", action="store_true", help="the batched FFT's model instead (fft_main)")
    p.add_argument("--compile", action="store_true", help="torch.compile's fused step beside eager (compile_main)")
    p.add_argument("--kernels", default="", help="the image's kernels, as scons kernels= (categories or ops, comma "
                                                 "separated; default the whole table)")
    p.add_argument("--dtypes", default="", help="the image's dtypes, as scons dtypes= (default all)")
    p.add_argument("--gemm-pe", default="", help="the GEMM's PE array at opt=4, PMxPN, as scons gemm_pe= (default "
                                                 "the platform's, platforms.GEMM_PE)")
    args = p.parse_args(argv)
    wanted = tuple(x for x in args.kernels.split(",") if x)
    dtypes = tuple(x for x in args.dtypes.split(",") if x)
    pe = tuple(int(x) for x in args.gemm_pe.split("x")) if args.gemm_pe else None
    image(4, PLATFORMS[platforms.DEFAULT], wanted, dtypes, pe)  # a selection of no kernel is refused before timing
    if args.compile:
        compile_main(os.path.join(ROOT, "build", "bench", "perf_model_compile.json"),
                     os.path.join(ROOT, "build", "bench", "compile.json"))
        return 0
    if args.fft:
        fft_main(os.path.join(ROOT, "build", "bench", "perf_model_fft.json"))
        return 0
    if args.cnn:
        cnn_main(os.path.join(ROOT, "build", "bench", "perf_model_cnn.json"))
        return 0
    rows = model(args.n, wanted, dtypes)
    lim = limits(wanted, dtypes)
    selection = ("kernels=" + args.kernels if wanted else "the whole table") + \
        (" dtypes=" + args.dtypes if dtypes else "")
    print(f"physical limits (data sheets): memory peak and host link per direction; the opt=4 image ({selection}): "
          "CUs of each streaming engine, GEMM CUs x PE array, whether the build's estimate says it fits")
    print_table(["platform", "memory", "peak GB/s", "PCIe Gen3 x16 GB/s", "measured GB/s", "stream CUs", "GEMM",
                 "fits (fullest)"], lim)
    print(f"\nprojected for {args.n} float32 elements per op, against this CPU's measured time")
    print("(x ceiling: the speed-up the card's memory peak alone allows, moving the op's bytes at peak)")
    print_table(["category", "opt", "platform", "CUs", "Gelem/s", "GB/s", "% peak", "bound", "device ms", "+PCIe ms",
                 "cpu ms", "x resident", "x +PCIe", "x ceiling"],
                [[r["category"], r["level"], r["platform"], r["cus"], r["gelem_per_s"], r["gbps"], r["percent_of_peak"],
                  r["bound"], r["device_ms"], r["with_transfers_ms"], r["cpu_ms"], r["speedup_resident"],
                  r["speedup_with_transfers"], r["speedup_ceiling"]] for r in rows])
    members = members_model(args.n, wanted, dtypes)
    print(f"\nmembers at opt=4, {args.n} elements: compute lanes (of the word's) against the memory")
    print_table(["member", "platform", "lanes", "of", "CUs", "Gelem/s", "GB/s", "% peak", "bound", "device ms"],
                [[r["member"], r["platform"], r["compute_lanes"], r["word_lanes"], r["cus"], r["gelem_per_s"],
                  r["gbps"], r["percent_of_peak"], r["bound"], r["device_ms"]] for r in members])
    for r in rows:
        if r["level"] == 4 and r["speedup_ceiling"] < 1:
            print(f"{r['platform']} {r['category']}: its {r['peak_gbps']:.1f} GB/s peak is below what this CPU "
                  f"reached ({r['gbps'] * r['device_ms'] / r['cpu_ms']:.1f} GB/s): no design on it is faster here; "
                  "an embedded board's own host is its processing system's CPU, not this one")
    energy = energy_rows(rows, args.n)
    print(f"\nenergy per op at {args.n} float32 (board power or TDP x time; {CPU['tdp_source']}; "
          f"{H100['name']}: {H100['tdp_w']} W TDP x measured time)")
    print_table(["op", "device", "W", "ms", "mJ", "how"],
                [[H100["ops"][e["category"]], e["device"], e["watts"], e["ms"], e["mj"], e["kind"]] for e in energy])
    # docs/img shows the default image: a selection's projection is printed and written to --json only.
    plots = not (wanted or dtypes or pe)
    gemm_rows = gemm_report(wanted=wanted, dtypes=dtypes, pe=pe, plots=plots)
    write_json(args.json, {"benchmark": "perf_model", "machine": machine(), "n": args.n, "clock_hz": CLOCK_HZ,
                           "launch_s": LAUNCH_S, "fill_cycles": FILL_CYCLES, "kernels": wanted, "dtypes": dtypes,
                           "cpu": CPU, "h100": H100, "limits": lim, "rows": rows, "members": members,
                           "energy": energy, "gemm": gemm_rows})
    plt = pyplot() if plots else None
    if plt is not None:
        plot(plt, rows, energy, args.n, members)
    elif not plots:
        print("(no plots: docs/img shows the default image, not a --kernels/--dtypes/--gemm-pe selection)")
    return 0


def plot(plt, rows: list[dict], energy: list[dict], n: int, members: list[dict]) -> None:
    """docs/img/perf_model.png: speed-up per level and GB/s (% of peak) at opt=4 beside the limits;
    docs/img/perf_model_members.png: % of peak at opt=4 per member (compute lanes) and platform;
    docs/img/perf_model_energy.png: energy per op beside the CPU and the H100."""
    cats = list(dict.fromkeys(r["category"] for r in rows))
    fig, axes = plt.subplots(2, len(cats), figsize=(4.2 * len(cats), 7.6), squeeze=False)
    for ax, cat in zip(axes[0], cats):
        for level in (1, 2, 3, 4):
            pts = [r for r in rows if r["category"] == cat and r["level"] == level]
            ax.plot([r["platform"] for r in pts], [r["speedup_resident"] for r in pts], marker="o", label=f"opt={level}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(f"{cat}: x CPU (resident)", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7)
    for ax, cat in zip(axes[1], cats):
        pts = [r for r in rows if r["category"] == cat and r["level"] == 4]
        ax.bar([r["platform"] for r in pts], [r["gbps"] for r in pts], label="opt=4 projected")
        ax.scatter([r["platform"] for r in pts], [r["peak_gbps"] for r in pts], color="red", marker="_", s=400,
                   label="memory peak", zorder=3)
        for i, r in enumerate(pts):
            ax.text(i, r["gbps"], f"{r['percent_of_peak']:.0f}%", ha="center", va="bottom", fontsize=7)
        ax.axhline(PCIE_GEN3_X16_GBPS, color="grey", ls="--", lw=0.8, label="PCIe Gen3 x16 15.75")
        ax.axhline(PCIE_MEASURED_GBPS, color="grey", ls=":", lw=0.8, label="PCIe measured ~12")
        ax.set_yscale("log")
        ax.set_title(f"{cat}: GB/s at opt=4", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=6)
    fig.tight_layout()
    save_plot(fig, "perf_model.png")
    if members:
        names = list(dict.fromkeys(r["member"] for r in members))
        aliases = list(dict.fromkeys(r["platform"] for r in members))
        lanes = {r["member"]: f"{r['compute_lanes']} of {r['word_lanes']} lanes" for r in members}
        fig, ax = plt.subplots(figsize=(10, 3.8))
        width = 0.8 / len(aliases)
        for j, alias in enumerate(aliases):
            pts = {r["member"]: r["percent_of_peak"] for r in members if r["platform"] == alias}
            ax.bar([i + j * width for i in range(len(names))], [pts.get(m, 0) for m in names], width, label=alias)
        ax.axhline(70, color="red", lw=0.8, ls="--", label="target: 70% of peak")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels([f"{m}\n{lanes[m]}" for m in names], fontsize=7)
        ax.set_ylabel("% of the card's peak memory bandwidth")
        ax.set_title(f"opt=4 members, {n} elements: compute lanes against the memory (the build's engine CUs)",
                     fontsize=9)
        ax.legend(fontsize=7, ncol=4)
        fig.tight_layout()
        save_plot(fig, "perf_model_members.png")
    cats = [c for c in ("binary", "reduce_all") if any(e["category"] == c for e in energy)]
    if not cats:
        return
    fig, axes = plt.subplots(1, len(cats), figsize=(5 * len(cats), 3.4), squeeze=False)
    for ax, cat in zip(axes[0], cats):
        pts = [e for e in energy if e["category"] == cat]
        colors = ["tab:blue" if e["kind"] == "projected" else "tab:grey" for e in pts]
        ax.barh([e["device"] for e in pts], [e["mj"] for e in pts], color=colors)
        ax.set_xscale("log")
        ax.set_xlabel(f"mJ per {H100['ops'][cat]} of {n} float32")
        ax.set_title(f"{H100['ops'][cat]}: energy per op (W x time)", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    save_plot(fig, "perf_model_energy.png")


if __name__ == "__main__":
    sys.exit(main())
