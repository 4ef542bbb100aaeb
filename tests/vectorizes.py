"""Which of some C++ functions g++ vectorizes a loop in, compiled with the emulated image's flags
(site_scons/afpga/emu.py): the tests that keep the element functions and the reduce kernels' lane
loops vectorizable ask it."""
from __future__ import annotations

import subprocess

from codegen.generate import ROOT

# -fno-ipa-icf: g++ would fold functions of identical code into one and report its loop on the
# first one's line only.
FLAGS = ["-std=c++14", "-faligned-new", "-O3", "-march=native", "-ffp-contract=off", "-Wno-unknown-pragmas",
         "-fno-ipa-icf"]


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
