"""What the codegen writes, decided from our table and the kernel library alone -- no PyTorch, so
SCons can ask on every run at no cost. The build declares these files as targets and builds the
image from the plan's kernels; the codegen writes exactly them (generate.run checks it)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from . import library as kernel_library
from .abi import LEVELS
from .engines import engine_source, groups
from .model import Kernel, kernels_of
from .table import entry_kernels, load_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HLS_ROOT = os.path.join(ROOT, "kernels", "hls")

MANIFEST = "kernels.json"  # what each op runs (the build report, the lint)
ABI_HEADER = "afpga_abi.h"  # codegen/abi.py for C++
UNITS_MAX_ENTRIES = 48  # each FPGAType unit includes ATen headers (~30 s of g++); a few build in parallel


def selected(entry, kernels: tuple[Kernel, ...], wanted: tuple[str, ...]) -> bool:
    """Whether `kernels=` (categories or ops; empty: all) selects `entry`, which runs `kernels`. An
    op name selects the entries whose own kernel (or a stub's) it is, not a host function that
    also runs it: `kernels=mul` does not bring weight_norm's reductions into the image."""
    own = {entry.kernel, *(k for _, k in entry.stubs)}
    return not wanted or any(k.op.category in wanted or (k.op.name in wanted and f"{k.op.category}/{k.op.name}" in own)
                             for k in kernels)


def unit_count(n_entries: int) -> int:
    return max(1, -(-n_entries // UNITS_MAX_ENTRIES))


def member_file(level: int) -> str:
    """The image's member table at one level (codegen/engines.py), for the xclbin."""
    return f"members_opt{level}.txt"


def interface_file(level: int) -> str:
    """The kernels' AXI interfaces at one level (codegen/interface.py), for the link and the xclbin."""
    return f"interface_opt{level}.json"


def emu_unit(key: str, level: int) -> str:
    """The emulated image's translation unit of one engine (codegen/engines.py engine_key): it
    includes the engine, which includes its members."""
    return f"emu/opt{level}/{key}.cpp"


@dataclass(frozen=True)
class Plan:
    """Paths relative to the codegen's output folder."""

    fpga_type: tuple[str, ...]  # FPGAType.h and its translation units (every entry, for the host)
    kernels: tuple[Kernel, ...]  # the kernels of the entries `kernels=` selects, in table order

    def hls(self, level: int) -> tuple[str, ...]:
        return tuple(k.source(level) for k in self.kernels)

    def categories(self) -> tuple[str, ...]:
        return tuple(sorted({k.op.category for k in self.kernels}))

    def engine_keys(self, level: int) -> tuple[str, ...]:
        """The engines that hold the kernels at `level` (codegen/engines.py groups)."""
        return tuple(groups(self.kernels, level))

    def engines(self, level: int) -> tuple[str, ...]:
        """The engines' sources (codegen/engines.py)."""
        return tuple(engine_source(key, level) for key in self.engine_keys(level))

    def emu_units(self, level: int) -> tuple[str, ...]:
        return tuple(emu_unit(key, level) for key in self.engine_keys(level))

    def files(self, levels=LEVELS) -> tuple[str, ...]:
        """Every file `run` writes for these levels."""
        per_level = [f for level in levels for f in (*self.hls(level), *self.engines(level), *self.emu_units(level),
                                                     interface_file(level), member_file(level))]
        return (ABI_HEADER, *self.fpga_type, MANIFEST, *per_level)


def plan(table_path: str, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()) -> Plan:
    """`wanted`: kernels= (categories or ops); `dtypes`: dtypes= (empty: every one the table lists)."""
    library = kernel_library.load_library(HLS_ROOT)
    table = load_table(table_path)
    ks = kernels_of(k for e, k in ((e, entry_kernels(e, library)) for e in table.entries) if selected(e, k, wanted))
    ks = tuple(k for k in ks if not dtypes or k.dtype.name in dtypes)
    n = unit_count(len(table.entries))
    return Plan(("FPGAType.h", *(f"FPGAType_{i}.cpp" for i in range(n))), ks)
