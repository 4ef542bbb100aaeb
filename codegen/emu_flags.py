"""The g++ flags of every kernel compiled for the emulated device: the image's category units
(site_scons/afpga/emu.py), the fused kernels compiled at run time (aten_fpga/compile/cache.py) and
the vectorization tests (tests/vectorizes.py), so that all three compile the HLS sources alike."""
from __future__ import annotations

# -std=c++14: Vitis HLS's language level; the image unit (image.cpp) is C++14 too, since every
# category unit includes its image.h. -faligned-new: the stream shim's std::vector holds
# over-aligned words (a 512-bit hls::vector is alignas(64)); C++14's operator new would only give
# 16 bytes (C++17 passes the alignment by default). -Werror=c++17-extensions: g++ would accept
# `if constexpr`, inline variables and fold expressions in C++14 mode with a mere warning; this
# makes a kernel that is not C++14 fail the build.
# -mmove-max/-mstore-max=256: a 512-bit word (a stream's, or a vector copied between stages) moves
# in 256-bit halves, as the stages load it; with the 128-bit moves g++ picks for Zen 3, words go
# through the stack and general registers, and each load of a copied word stalls on store
# forwarding (exp at 2^24: 31 -> 16 ms; docs/runtime.md).
# -ffp-contract=off: g++ must not fuse a*b+c where the kernel (and ATen) rounds twice.
# -fno-gnu-unique: the kernel registry is an inline function's static; as a GNU unique symbol the
# loader would share one registry among all images loaded side by side.
# -march=native: the host's vector ISA (AVX2 or AVX-512) for speed; the bits do not depend on it
# (the kernels write their arithmetic out, and -ffp-contract=off keeps g++ from fusing it), which
# tests/test_emu_isa.py checks by building the image for x86-64-v3 (AVX2) too.
def emu_cxxflags(march: str = "native") -> tuple[str, ...]:
    return ("-std=c++14", "-faligned-new", "-Werror=c++17-extensions", "-O3", f"-march={march}",
            "-mmove-max=256", "-mstore-max=256", "-ffp-contract=off", "-fno-gnu-unique", "-fPIC",
            "-Wno-unknown-pragmas", "-Wno-unused-label")


EMU_CXXFLAGS = emu_cxxflags()

# Per category, on top, for its units (the full-rate engine's and the narrow one's: unary and
# unary_narrow, where sin, cos and the other costly float32 functions are): the unary kernels never
# read the floating-point exception flags, so g++ may evaluate both sides of afpga::math's selects
# and vectorize its lane loops (values are unchanged; without it sin ran 5x slower). Not everywhere:
# it made the NaN-propagating max of the reduce kernels several times slower.
UNIT_CXXFLAGS = {"unary": ("-fno-trapping-math",)}
