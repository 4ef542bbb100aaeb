"""The one performance model of a card: what a launch of a member kernel takes on the image the build
makes for a platform, and from it what a recorded workload -- report()'s per-op launches, bytes and
work -- would take there (aten_fpga.report()'s projected_seconds, format_report(platform=...), the
torch.profiler ranges, docs/workflow.md). bench/perf_model.py prints its tables from this module.

The image projected is the one the build makes (a kernels=/dtypes= selection, the CUs of a
plan=), read from the build's own modules, not restated here:
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
- 15 us per kernel launch (XRT run start + wait);
- a workload (project_rows): per op and kernel, each launch at its mean bytes (elements = bytes over
  the member's bytes per element) through the member's streams as above, or, for the GEMM and the
  FFT, their arrays' compute time when longer (launch_work: a GEMM launch's m*n*k*batch
  multiply-adds at the PE array's MACs a cycle per CU; an FFT's samples at fft_row_cycles per
  FFT_POINTS points); a kernel the image lacks runs on the host (its bytes cross the host link);
  every sync crosses the host link; an op that fell back takes the CPU time measured here. Energy:
  the card's board power x the projected time.
"""
from __future__ import annotations

import functools
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.join(ROOT, "site_scons") not in sys.path:  # the build's own plan (as SConstruct imports it)
    sys.path.append(os.path.join(ROOT, "site_scons"))
from afpga import connectivity, platforms, resources, variables  # noqa: E402
from afpga.gen import KernelSource  # noqa: E402
from afpga.platforms import ALIASES, PLATFORMS  # noqa: E402
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
    engines: dict  # engine key (codegen/engines.py engine_key: a category, or its narrow engine) -> Engine
    link: connectivity.LinkPlan
    fit: resources.Fit

    @property
    def platform(self):
        return self.config.platform

    @property
    def clock_hz(self) -> float:
        return self.config.freq * 1e6 if self.config.freq else CLOCK_HZ

    def engine_of(self, member: str):
        """The engine that holds `member`."""
        return self.engines[engines_.engine_key(self.kernels[member], self.level)]

    def cu_names(self, key: str) -> tuple[str, ...]:
        name = self.engines[key].name
        return next(names for top, names in self.link.kernels if top.name == name)

    def cus(self, key: str) -> int:
        return len(self.cu_names(key))

    def streams(self, member: str) -> tuple[Stream, ...]:
        """The member's ports that stream its range: all of a pointwise member's; a reduction's
        input (its outputs are one element a row and the partials)."""
        k = self.kernels[member]
        e = self.engine_of(member)
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
          gemm_pe: tuple[int, int] | None = None, cus: tuple[tuple[str, int], ...] = ()) -> Image:
    """The image `scons target=hw opt=<level> platform=<platform> kernels=<wanted> dtypes=<dtypes>`
    builds (gemm_pe=: the GEMM's PE array, default the platform's; cus: (category, CUs) pairs, as a
    plan's build.cus sets them)."""
    kernels, doc, tops, built = _rendered(level, wanted, dtypes)
    pe = gemm_pe or tuple(int(x) for x in platforms.gemm_pe_default(platform).split("x"))
    cfg = variables.Config("hw", level, wanted, dtypes, platform, variables.default_cus(level, platform), None, "", "",
                           pe, False, cus_override=cus)
    # The engines as the build describes them (site_scons/afpga/gen.py), for their CUs and the estimate.
    by_name = {k.name: k for k in kernels}
    sources = tuple(KernelSource(e.name, e.category, "", e.source, "", tuple(
        KernelSource(m.kernel, e.category, by_name[m.kernel].dtype.name, by_name[m.kernel].source(level),
                     by_name[m.kernel].op.name, (), by_name[m.kernel].compute_lanes if level == 4 else 1)
        for m in e.members)) for e in built)
    link = connectivity.plan([tops[e.name] for e in built], {s.name: cfg.engine_cus(s) for s in sources}, platform)
    fit = resources.estimate(link, sources, tops, level, pe, False, doc.get("memories"),
                             doc.get("datapaths"))  # as resources.fit_of
    return Image(level, cfg, by_name, {e.key: e for e in built}, link, fit)


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
    cus = min(img.cus(img.engine_of(member).key), max(1, n // MIN_ELEMENTS_PER_CU))
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
    engine = img.engine_of(member).key
    streams = img.streams(member)
    clock = img.clock_hz
    if category in REDUCTIONS:
        cus, width = reduce_cus(category, img, member, n)
    else:
        cus = min(img.cus(engine), max(1, n // MIN_ELEMENTS_PER_CU))  # launch.h: >= 16384 per CU
    # Cycles per element: each master channel's (its streams' words, one a cycle: a master's read
    # and write channels are independent) and the datapath's; bytes per element on each master.
    port_cycles: dict[tuple[str, bool], float] = {}
    port_bytes: dict[str, float] = {}
    for s in streams:
        port_cycles[(s.bundle, s.output)] = port_cycles.get((s.bundle, s.output), 0.0) + 1 / s.per_word
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
        for (_, output), c in port_cycles.items():
            port = f"{'write' if output else 'read'} port"
            limits_[port] = min(limits_.get(port, float("inf")), clock / c)
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


def pe_array_seconds(m: int, n: int, k: int, platform) -> float:
    """Seconds of the XCL_OPT 4 GEMM kernel's compute for one m x n x k product (kernels/hls/gemm/opt4:
    TM = PM * SM rows and TN = PN * IL columns a tile; a tile runs its row blocks that hold rows of
    c, each taking k * IL cycles)."""
    pm, pn = image(4, platform).config.gemm_pe
    tm, tn = pm * GEMM_SM, pn * GEMM_IL
    blocks = (m // tm) * GEMM_SM + -(-(m % tm) // pm)  # row blocks over all row tiles
    return blocks * -(-n // tn) * k * GEMM_IL / CLOCK_HZ


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

GEMM_N = 4096
GEMM_TILE_1_3 = (64, 64, 64)  # TM, TN, TK of kernels/hls/gemm/opt1-3
GEMM_IL, GEMM_SM, GEMM_TK4 = 8, 8, 64  # opt4: accumulators per PE, PE row blocks per tile, k chunk


GEMM_MEMBER = "v_gemm_float32"

def one_kernel_workload(op: str, member: str, launches: int, nbytes: float, work: float = 0) -> dict:
    """report()-style rows of a workload that is `launches` launches of one kernel, resident (no
    host link, no fallback): what plan_image and the perf model's "alone as a workload" rows take."""
    return {op: {"fpga": launches, "cpu_fallback": 0, "bytes_to_device": 0, "bytes_to_host": 0, "cpu_seconds": 0,
                 "by_kernel": {member: {"launches": launches, "bytes": nbytes, "work": work}}}}


def workload_seconds(rows: dict, img: Image) -> float:
    return sum(op_seconds(r, img)["seconds"] for r in rows.values())


def plan_image(rows: dict, platform, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = (),
               level: int = 4) -> tuple[Image, dict]:
    """The image of `wanted`/`dtypes` that serves a recorded workload (report()-style `rows`) best
    within `platform`'s budget, and the plan's build entries that make it (`cus`, `gemm_pe`).

    From one CU of each streaming engine and an 8 x 8 GEMM array, it takes one step at a time: of a
    CU more for a streaming engine, a row or a column (4 PEs) more of the GEMM's array, or a GEMM CU
    more (at most one a SLR), the one that cuts the workload's projected time the most while the
    image still fits (resources.estimate: the build's fit check, CUs and masters per bank
    included). It stops when no step fits or helps: the CUs go where the time goes."""
    categories = {k.op.category for k in plan(TABLE, wanted, dtypes).kernels}
    streaming = sorted(categories & variables.STREAMING)
    has_gemm = level == 4 and "gemm" in categories
    slrs = resources.CAPACITY[platform.alias].slrs

    def build(cus: dict, pe):
        return image(level, platform, wanted, dtypes, pe, tuple(sorted(cus.items())))

    def entries(cus: dict, pe) -> dict:
        return {"cus": cus} | ({"gemm_pe": f"{pe[0]}x{pe[1]}"} if pe else {})

    cus, pe = {c: 1 for c in streaming} | ({"gemm": 1} if has_gemm else {}), (8, 8) if has_gemm else None
    best = build(cus, pe)
    if not best.fit.fits:
        return best, entries(cus, pe)
    seconds = workload_seconds(rows, best)
    while True:
        steps = [(dict(cus, **{c: cus[c] + 1}), pe) for c in streaming]
        if has_gemm:
            steps += [(cus, (pe[0] + 4, pe[1])), (cus, (pe[0], pe[1] + 4))] + \
                ([(dict(cus, gemm=cus["gemm"] + 1), pe)] if cus["gemm"] < slrs else [])
        tried = []
        for c, p in steps:
            if p and max(p) > 64:
                continue
            img = build(c, p)
            if img.fit.fits:
                tried.append((workload_seconds(rows, img), c, p, img))
        if not tried:
            break
        t, c, p, img = min(tried, key=lambda x: x[0])
        if t >= seconds * (1 - 1e-3):  # nothing helps by more than a thousandth
            break
        seconds, cus, pe, best = t, c, p, img
    return best, entries(cus, pe)


def gemm_design(level: int, platform, pe: tuple[int, int] | None = None, wanted: tuple[str, ...] = (),
                dtypes: tuple[str, ...] = (), cus: tuple[tuple[str, int], ...] = ()) -> dict:
    """The GEMM engine of the image at `level` on `platform` (gemm_pe= `pe`, default the platform's;
    `cus`: a plan's CUs): float32 MACs per cycle per CU, CUs, tile, port lanes, and its DSPs against
    what the rest of the image leaves of the budget (resources.estimate)."""
    img = image(level, platform, wanted, dtypes, pe, cus)
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
                    wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = (),
                    cus: tuple[tuple[str, int], ...] = ()) -> dict:
    """Projected GFLOP/s of one n x n x n float32 product, resident in device memory.

    Per CU and output tile (TM x TN, k in TK chunks): compute takes ceil(n/TK) * TK * TM * TN / MACs
    cycles (edges padded to whole tiles) plus the stage's own fills and drains; level 1 adds its
    load phases (each chunk's a and b tiles, one element per cycle, not overlapped) and the store;
    levels 2-4 overlap loads, compute and store, so a tile takes the longest of them. Memory: each
    tile reads n * (TM + TN) elements, a and b both on the engine's read master (one port word a
    cycle between them, within its bank's share), and writes TM * TN on the write master."""
    d = gemm_design(level, platform, pe, wanted, dtypes, cus)
    img = image(level, platform, wanted, dtypes, pe, cus)
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


# --- a workload: report()'s per-op launches, bytes and work on an image ----------------------------
FFT_POINTS = 1024  # the FFT's cycles per sample are fft_row_cycles at this length
_launch_cache: dict = {}


def compute_seconds(img: Image, member: str, work: float) -> float:
    """The seconds of `work` (launch_work units) on the member's engine's arrays, all its CUs: a
    GEMM's multiply-adds at its PE array's MACs a cycle (one below XCL_OPT 4), an FFT's samples at
    its row cycles. 0 for the engines without an array (their compute is in the streams' lanes)."""
    category = img.kernels[member].op.category
    cycles_per_work = {"gemm": 1 / (img.config.gemm_pe[0] * img.config.gemm_pe[1]) if img.level == 4 else 1.0,
                       "fft": fft_row_cycles(FFT_POINTS, img.level) / FFT_POINTS}.get(category)
    if not cycles_per_work or not work:
        return 0.0
    return work * cycles_per_work / (img.cus(category) * img.clock_hz)


def launch_seconds(img: Image, member: str, nbytes: float, work: float = 0) -> float:
    """One launch of `member` spanning `nbytes` of device memory (its operands together) with `work`:
    the streams' time (device_seconds at the elements those bytes hold), or the arrays' when longer."""
    key = (id(img), member, round(nbytes), round(work))
    if key in _launch_cache:
        return _launch_cache[key]
    streams = img.streams(member)
    per_element = sum(s.bytes for s in streams)
    if any(not s.output for s in streams) or (img.level == 4 and img.kernels[member].op.driver == "pointwise"):
        n = max(1, round(nbytes / per_element)) if per_element else 1
        seconds = device_seconds(img.kernels[member].op.category, img, n, member)["seconds"]
    else:  # a member that only writes (fills, ranges): its write port a word a cycle within its bank
        seconds = LAUNCH_S + FILL_CYCLES / img.clock_hz + nbytes / min(img.platform.bank_gbps * 1e9, 64 * img.clock_hz)
    fixed = LAUNCH_S + FILL_CYCLES / img.clock_hz
    seconds = max(seconds, fixed + compute_seconds(img, member, work))
    _launch_cache[key] = seconds
    return seconds


def board_watts(img: Image) -> float | None:
    return BOARD_WATTS.get(img.platform.alias)


def op_seconds(row: dict, img: Image) -> dict:
    """One report() row on `img`: {"seconds", "kernel_seconds", "link_seconds", "cpu_seconds",
    "missing"}: its launches (each at its kernel's mean bytes and work), its syncs over the host
    link, the CPU time of its fallbacks (measured here), and the kernels the image lacks (their
    launches would fall back: their bytes counted over the host link both ways)."""
    link_bps = img.platform.host_link_gbps * 1e9 if img.platform.host_link_gbps else None
    kernel_s, missing, link_bytes = 0.0, [], row["bytes_to_device"] + row["bytes_to_host"]
    for name, k in row.get("by_kernel", {}).items():
        if not k["launches"]:
            continue
        if name in img.kernels:
            kernel_s += k["launches"] * launch_seconds(img, name, k["bytes"] / k["launches"], k["work"] / k["launches"])
        else:
            missing.append(name)
            link_bytes += 2 * k["bytes"]
    link_s = link_bytes / link_bps if link_bps else 0.0
    cpu_s = row["cpu_seconds"] if row["cpu_fallback"] else 0.0
    return {"seconds": kernel_s + link_s + cpu_s, "kernel_seconds": kernel_s, "link_seconds": link_s,
            "cpu_seconds": cpu_s, "missing": missing}


def step_projection(rows: dict, img: Image, host_seconds: float) -> dict:
    """A training step (report()'s rows of one step) on `img`, with `host_seconds` of host work
    (Python, dispatch and launch preparation, measured on this machine: the step's time less the
    time it waited for kernels), both ways:
    - synchronous: the host waits for every launch (its LAUNCH_S start and wait, then the kernel),
      so the device idles while the host works and the host while the device does;
    - asynchronous: the host pays each launch's LAUNCH_S start and returns; the device runs the
      queue meanwhile, so the step takes the longer of the two, host and device (a lower bound: the
      syncs a step makes -- a loss read, a fallback -- are not in report() and add the queue's drain
      each time).
    Link transfers and fallbacks' CPU time are serial both ways. Returns seconds and the fraction of
    the step the device was idle, per way."""
    launches, kernel_s, serial_s = 0, 0.0, 0.0
    for r in rows.values():
        p = op_seconds(r, img)
        launches += sum(k["launches"] for name, k in r.get("by_kernel", {}).items() if name in img.kernels)
        kernel_s += p["kernel_seconds"]
        serial_s += p["link_seconds"] + p["cpu_seconds"]
    busy_s = max(0.0, kernel_s - launches * LAUNCH_S)  # the kernels themselves, without the launch's wait
    host_s = host_seconds + launches * LAUNCH_S
    sync_s = host_seconds + kernel_s + serial_s
    async_s = max(host_s, busy_s) + serial_s

    def idle(step: float) -> float:
        return 1.0 - busy_s / step if step > 0 else 0.0

    return {"launches": launches, "host_seconds": host_seconds, "device_busy_seconds": busy_s,
            "sync_seconds": sync_s, "async_seconds": async_s,
            "sync_device_idle": idle(sync_s), "async_device_idle": idle(async_s)}


def platform_of(name: str | None):
    """A Platform by name or alias (u250, u55c, ...), with the valid ones in the error."""
    if name is None:
        return None
    full = ALIASES.get(name, name)
    if full not in PLATFORMS:
        raise ValueError(f"unknown platform {name!r}; choose one of {', '.join(ALIASES)} (or a full name)")
    return PLATFORMS[full]


def loaded_image(platform: str | None = None, path: str | None = None) -> Image:
    """The model of the image loaded on the current device (or at `path`), on its own platform or on
    `platform`: its level, platform and engine CUs from the build report beside it (an emulated
    image is planned for platforms.DEFAULT, the U250, unless built with platform=), its members from
    the device's kernel list."""
    from . import _C, image as image_path

    path = path or image_path()
    if not path:
        raise RuntimeError("no fpga image is loaded: build one with `scons` or aten_fpga.load() one")
    try:
        with open(os.path.join(os.path.dirname(path), "report.json"), encoding="utf-8") as f:
            built = json.load(f)
    except (OSError, ValueError):
        built = {}
    own = PLATFORMS.get(built.get("platform", {}).get("name", platforms.DEFAULT), PLATFORMS[platforms.DEFAULT])
    target = platform_of(platform) or own
    level = int(built.get("opt", 4))
    everything = {k.name: k for k in plan(TABLE).kernels}
    loaded = [everything[n] for n in _C.kernel_names() if n in everything]
    wanted, dtypes = ((), ()) if len(loaded) == len(everything) else \
        (tuple(sorted({k.op.name for k in loaded})), tuple(sorted({k.dtype.name for k in loaded})))
    cus = ()
    if target is own:  # the CUs it was built with; on another card, the build's defaults for that card
        # the category's own engine (e_unary), not its narrow one (e_unary_narrow: one CU by rule)
        cus = tuple(sorted((k["category"], len(k["cus"])) for k in built.get("kernels", [])
                           if k.get("cus") and k["name"] == engines_.engine_name(k["category"])))
    return image(level, target, wanted, dtypes, None, cus)


def project_rows(rows: dict, img: Image) -> dict:
    """report()'s rows with projected_seconds and projected_joules (board power x time) on `img`."""
    watts = board_watts(img)
    out = {}
    for op, r in rows.items():
        p = op_seconds(r, img)
        out[op] = dict(r, projected_seconds=p["seconds"], projected_joules=watts * p["seconds"] if watts else None,
                       projected_missing=p["missing"])
    return out


def kernel_table(img: Image, names) -> dict:
    """{kernel: (seconds at 2**i bytes for i < 41, fixed seconds, seconds per work)}: the model
    sampled for the profiler ranges (host/ps/projection.h interpolates between the samples)."""
    fixed = LAUNCH_S + FILL_CYCLES / img.clock_hz
    return {n: ([launch_seconds(img, n, float(2 ** i)) for i in range(41)], fixed, compute_seconds(img, n, 1))
            for n in names if n in img.kernels}


def install(platform: str | None = None) -> str:
    """Make every torch.profiler range of a launch carry its projected seconds on `platform` (default
    the loaded image's) as keyword inputs `projected_us` and `platform` (profile(record_shapes=True)
    shows them). Returns the platform's alias."""
    from . import _C

    img = loaded_image(platform)
    _C.set_projection(img.platform.alias, kernel_table(img, _C.kernel_names()))
    return img.platform.alias
