"""Build variables (`scons -h` lists them): validated at once, with the valid values in the error."""
from __future__ import annotations

import os
from dataclasses import dataclass

from SCons.Errors import UserError
from SCons.Script import EnumVariable, Variables

from codegen.abi import LEVEL_NAMES, LEVELS
from codegen.engines import NARROW

from . import plan_file, platforms
from .platforms import Platform

# emu: g++ image, no Vitis. sw_emu (older Vitis), hw_emu, hw: v++ images for the chosen platform.
TARGETS = ("emu", "sw_emu", "hw_emu", "hw")
MAX_CUS = 64


# Engines whose kernels stream their operands once (memory bound): at XCL_OPT 3 and 4 they get
# Platform.stream_cus CUs, enough CU ports to keep the card's banks busy; the compute-bound ones
# (gemm, fft, ...) keep one, the GEMM engine as many CUs as its PE array fits in the card's DSPs.
STREAMING = frozenset({"unary", "binary", "ternary", "reduce", "copy", "fill"})


def default_cus(opt: int, platform: Platform) -> int:
    """The cus= of an engine that streams, when cus= is not given: XCL_OPT 3 and 4 spread it over
    the card's banks (Platform.stream_cus); the lower levels have one CU of every engine. The
    emulated image mirrors the card's CUs (each one a host thread), so its launches split as the
    card's do. At XCL_OPT 4 a card may hold fewer (Platform.vector_stream_cus)."""
    if opt == 4 and platform.vector_stream_cus:
        return platform.vector_stream_cus
    return platform.stream_cus if opt >= 3 else 1


@dataclass(frozen=True)
class Config:
    target: str
    opt: int
    kernels: tuple[str, ...]  # categories or op names; empty: the whole table
    dtypes: tuple[str, ...]  # empty: every dtype the table lists
    platform: Platform
    cus: int
    freq: int | None  # MHz for v++ --kernel_frequency; None: the platform's default clock
    common_image: str  # embedded platforms: the folder with rootfs.ext4 and Image
    cache: str  # CacheDir for .xo files; "" disables it
    gemm_pe: tuple[int, int]  # the GEMM kernel's PE array at XCL_OPT 4: PM x PN
    cus_given: bool  # cus= was set: every kernel gets `cus` CUs
    fused: str = ""  # a folder of fused kernel sources (aten_fpga.compile.export) to build in too
    march: str = "native"  # target=emu: g++'s -march for the image
    plan: str = ""  # plan=: the workload plan file (plan_file.py) the selection came from
    cus_override: tuple[tuple[str, int], ...] = ()  # (category, CUs) a plan gives its engines

    def kernel_cus(self, category: str) -> int:
        """CUs of the engine of `category`: `cus` if given; else the streaming engines get `cus`, the
        GEMM engine at XCL_OPT 4 as many CUs as its PE array (one per CU, whatever its members'
        dtypes) fits in the card's DSP budget (platforms.gemm_cus), and every other engine one. A
        plan's CUs for an engine come first."""
        for name, n in self.cus_override:
            if name == category:
                return n
        if self.cus_given:
            return self.cus
        if category in STREAMING:
            return dict(self.platform.vector_stream_cus_of).get(category, self.cus) if self.opt == 4 else self.cus
        if category == "gemm" and self.opt == 4:
            return platforms.gemm_cus(self.platform, self.gemm_pe, self.target)
        return 1

    def engine_cus(self, k) -> int:
        """CUs of engine `k` (a gen.KernelSource); a narrow engine (codegen/engines.py NARROW:
        compute-bound members) one unless cus= is given."""
        if k.name.endswith(NARROW) and not self.cus_given:
            return 1
        return self.kernel_cus(k.category)

    @property
    def hardware(self) -> bool:
        return self.target != "emu"

    @property
    def target_dir(self) -> str:
        """Where one target/platform's builds live, every level beside the others."""
        return "build/emu" if not self.hardware else f"build/{self.target}/{self.platform.name}"

    @property
    def level_dir(self) -> str:
        """The image's folder under target_dir: opt<N>, and -<march> for an emulated image built for
        another ISA than the host's."""
        return f"opt{self.opt}" + ("" if self.march == "native" else f"-{self.march}") + \
            (f"-plan-{plan_file.stem(self.plan)}" if self.plan else "")

    @property
    def out_dir(self) -> str:
        return f"{self.target_dir}/{self.level_dir}"


def _names(valid):
    def check(key, value, env):
        bad = [v for v in value.split(",") if v and v not in valid]
        if bad:
            raise UserError(f"{key}={value!r}: unknown {', '.join(bad)}. Valid: {', '.join(sorted(valid))} "
                            f"(comma separated; empty for all)")
    return check


def _whole(low, high, allow_empty=True):
    def check(key, value, env):
        if allow_empty and value == "":
            return
        if not value.isdigit() or not low <= int(value) <= high:
            raise UserError(f"{key}={value!r} is not valid: give a whole number from {low} to {high}")
    return check


def _gemm_pe(key, value, env):
    if value and not platforms.parse_gemm_pe(value):
        raise UserError(f"{key}={value!r} is not valid: give PMxPN, each a multiple of 4 from 4 to 64, e.g. 16x16")


def declare(args, kernel_names, dtypes) -> Variables:
    """`kernel_names`: the library's categories and ops; `dtypes`: the dtypes codegen knows."""
    v = Variables(None, args)
    v.Add(EnumVariable("target", "what to build: emu = g++ emulated image; sw_emu, hw_emu, hw = v++ xclbin",
                       "emu", allowed_values=TARGETS))
    v.Add(EnumVariable("opt", "XCL_OPT level: " + ", ".join(f"{n} {LEVEL_NAMES[n]}" for n in LEVELS), "4",
                       allowed_values=tuple(map(str, LEVELS))))
    v.Add("kernels", f"only these kernel categories or ops, comma separated (default: the whole table); "
                     f"valid: {', '.join(sorted(kernel_names))}", "", _names(set(kernel_names)))
    v.Add("dtypes", f"only kernels of these dtypes, comma separated (default: all); valid: {', '.join(dtypes)}",
          "", _names(set(dtypes)))
    v.Add("plan", "a workload plan (YAML) from aten_fpga.record: the image holds the kernels and dtypes its ops ran "
                  "and the CUs its build.cus names, in build/<target>/.../opt<N>-plan-<name> (not with kernels= or "
                  "dtypes=)", "")
    v.Add(EnumVariable("platform", "the card (name or alias):\n" + platforms.describe() + "\n   ",
                       platforms.DEFAULT, allowed_values=tuple(platforms.PLATFORMS) + tuple(platforms.ALIASES),
                       map=platforms.ALIASES))
    v.Add("cus", f"compute units per engine, 1-{MAX_CUS} (default: at opt=3 and 4, as on the card, the streaming "
                 f"engines get enough to keep its banks busy: " + ", ".join(
                     f"{p.alias} {p.stream_cus}" + (f" ({p.vector_stream_cus} at opt=4)" if p.vector_stream_cus else "")
                     for p in platforms.PLATFORMS.values())
                 + "; gemm at opt=4 the platform's default CUs, or as many CUs of a gemm_pe= array as fit in ~60% of "
                 "the DSPs; else 1)", "",
          _whole(1, MAX_CUS))
    v.Add("freq", "kernel clock in MHz for v++ --kernel_frequency (default: the platform's)", "",
          _whole(50, 1000))
    v.Add("common_image", "embedded platforms: folder of the Xilinx common image (rootfs.ext4, Image) "
                          "for the package step (default: $EDGE_COMMON_SW)", os.environ.get("EDGE_COMMON_SW", ""))
    v.Add("cache", "CacheDir for finished .xo files, reused across builds and checkouts ('' disables)",
          "build/cache")
    v.Add("gemm_pe", "the GEMM kernel's PE array at XCL_OPT 4, PMxPN float multiply-adds per cycle (multiples of 4, "
                     "4-64; default per platform, an array one SLR holds, the largest that fits beside the whole table: "
                     + ", ".join(f"{a} {platforms.gemm_pe_default(platforms.PLATFORMS[n])}"
                                 for a, n in platforms.ALIASES.items())
                     + f"; target=emu: {platforms.gemm_pe_default(None, 'emu')}, the array the host CPU runs fastest, "
                       "with the same results as any other)", "", _gemm_pe)
    v.Add("fused", "v++ targets: also build the fused kernels (torch.compile) whose sources "
                   "`python -m aten_fpga.compile export <folder>` wrote into this folder", "")
    v.Add("march", "target=emu: the instruction set g++ compiles the emulated image for (-march; default native, "
                   "the host's). Another one (e.g. x86-64-v3, AVX2) builds into build/emu/opt<N>-<march>; "
                   "the results are the same bits on every ISA", "native", _march)
    return v


def _march(key, value, env):
    if not value or not all(c.isalnum() or c in "-_." for c in value):
        raise UserError(f"{key}={value!r} is not valid: give a g++ -march value, e.g. native or x86-64-v3")


def config(env) -> Config:
    opt = int(env["opt"])
    target = env["target"]
    platform = platforms.PLATFORMS[env["platform"]]
    if target != "emu" and platform.embedded and not env["common_image"]:
        raise UserError(f"platform={platform.alias} is embedded: its package step needs the Xilinx common image "
                        f"(rootfs.ext4, Image). Give common_image=<folder> or set EDGE_COMMON_SW.")
    if target != "emu" and env["march"] != "native":
        raise UserError(f"march={env['march']} is for target=emu (the emulated image); v++ builds for the card")
    split = lambda s: tuple(x for x in s.split(",") if x)  # noqa: E731
    kernels, dtypes, cus_override, gemm_pe = split(env["kernels"]), split(env["dtypes"]), (), ""
    if env["plan"]:
        if kernels or dtypes:
            raise UserError(f"plan={env['plan']} selects the kernels and dtypes itself: drop kernels= and dtypes= "
                            "(or edit the plan's build: section)")
        chosen = plan_file.selection(env["plan"])
        kernels, dtypes, cus_override = chosen.kernels, chosen.dtypes, chosen.cus
        # The plan's GEMM array is the card's; the emulated image keeps the array the host runs fastest
        # (the same results), with the plan's CUs.
        gemm_pe = chosen.gemm_pe if target != "emu" else ""
    return Config(target, opt, kernels, dtypes, platform,
                  int(env["cus"]) if env["cus"] else default_cus(opt, platform),
                  int(env["freq"]) if env["freq"] else None, env["common_image"], env["cache"],
                  platforms.parse_gemm_pe(env["gemm_pe"] or gemm_pe or platforms.gemm_pe_default(platform, target)),
                  bool(env["cus"]), env["fused"], env["march"], env["plan"], cus_override)
