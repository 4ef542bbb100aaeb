"""Which of some C++ functions g++ vectorizes a loop in, compiled with the emulated image's flags
(site_scons/afpga/emu.py): the tests that keep the element functions and the reduce kernels' lane
loops vectorizable ask it."""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

from codegen.emu_flags import EMU_CXXFLAGS
from codegen.generate import ROOT

# The emulated image's flags, and -fno-ipa-icf: g++ would fold functions of identical code into one
# and report its loop on the first one's line only.
FLAGS = [*EMU_CXXFLAGS, "-fno-ipa-icf"]


def vectorized(folder, header: str, functions: list[str]) -> list[bool]:
    """For each function (its whole definition on one line, after `#include header`), whether g++
    vectorized a loop in it."""
    src = folder / "loops.cpp"
    src.write_text("\n".join([f'#include "{header}"', *functions]) + "\n")
    cc = subprocess.run(["g++", *FLAGS, f"-I{ROOT}/kernels/hls/emu/include", f"-I{ROOT}/kernels/hls/include", "-c",
                         str(src), "-o", str(src.with_suffix(".o")), "-fopt-info-vec-optimized"],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    done = {int(line.split(":")[1]) for line in cc.stderr.splitlines()
            if line.startswith(str(src)) and "loop vectorized" in line}
    return [k + 2 in done for k in range(len(functions))]  # line 1 is the #include


def vectorized_alone(folder, header: str, functions: list[str]) -> list[bool]:
    """For each function, compiled alone in a file of its own (after `#include header`), whether g++
    vectorized any of it: a loop, or a basic block -- a short inner loop that g++ unrolls into its
    enclosing loop can only be vectorized as straight-line code, whose report names the line of
    the inlined header code it came from, not the function's (hence one function per file)."""
    def one(k: int) -> bool:
        src = folder / f"alone{k}.cpp"
        src.write_text(f'#include "{header}"\n{functions[k]}\n')
        cc = subprocess.run(["g++", *FLAGS, f"-I{ROOT}/kernels/hls/emu/include", f"-I{ROOT}/kernels/hls/include", "-c",
                             str(src), "-o", str(src.with_suffix(".o")), "-fopt-info-vec-optimized"],
                            capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr
        return any("loop vectorized" in line or "basic block part vectorized" in line for line in cc.stderr.splitlines())
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(len(functions))))
