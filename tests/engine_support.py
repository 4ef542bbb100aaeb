"""Helpers for the tests that run an engine's card path (-D__SYNTHESIS__) against its C simulation
(test_engine_datapaths.py, test_kernels_reduce_card_path.py): the generated tree in a temporary
folder, and engines compiled from it as shared libraries."""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codegen import abi
from codegen.engines import engine_name, engine_source
from codegen.gen_hls import generate_hls, template_env
from codegen.generate import HLS_ROOT, ROOT, add_engines
from codegen.plan import ABI_HEADER, member_file

INCLUDES = ["kernels/hls/emu/include", "kernels/hls/include"]


def generated(out: Path, kernels, levels) -> Path:
    """`kernels`' sources and engines at `levels`, written under `out` as the codegen writes them."""
    env = template_env(HLS_ROOT)
    files = {ABI_HEADER: abi.header(), **generate_hls(kernels, env, tuple(levels))}
    for level in levels:
        add_engines(kernels, files, level, env)
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return out


def compiled(gen: Path, builds, optimize: str = "-O0") -> dict:
    """{(level, engine key, synthesis): the engine compiled from `gen` as a shared library}, for each
    of `builds`, two g++ at a time; `synthesis` compiles the card's path (-D__SYNTHESIS__)."""
    def build(key):
        level, name, synthesis = key
        lib = gen / f"{engine_name(name)}_opt{level}{'_synth' if synthesis else ''}.so"
        cmd = ["g++", "-std=c++14", optimize, "-shared", "-fPIC", "-Wl,-Bsymbolic", "-Wno-unknown-pragmas",
               "-Wno-unused-label", *(["-D__SYNTHESIS__"] if synthesis else []),
               *(f"-I{ROOT}/{d}" for d in INCLUDES), f"-I{gen}", str(gen / engine_source(name, level)),
               "-o", str(lib)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return key, lib

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(build, builds))


def engine_members(gen: Path, level: int, engine: str) -> list[tuple[str, int, dict[str, str]]]:
    """The member table's lines of `engine` at `level`: (member, opcode, {member argument: engine argument})."""
    rows = [line.split() for line in (gen / member_file(level)).read_text().splitlines() if line.startswith("member ")]
    return [(member, int(opcode), dict(p.split("=") for p in pairs))
            for _, member, owner, opcode, *pairs in rows if owner == engine]
