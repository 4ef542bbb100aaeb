"""target=emu: the generated HLS sources compiled with g++ (our HLS shims on the include path)
into build/emu/opt<N>/torch_emu.so, described by torch.xclbin beside it -- the same container a
v++ build produces, so the host discovers kernels and compute units the same way for both."""
from __future__ import annotations

import json
import os

from SCons.Script import Action

from . import connectivity, hls_interface, xclbin
from .gen import GEN

LIBRARY = "torch_emu.so"


def write_xclbin(target, source, env):
    from .platforms import PLATFORMS

    params = json.loads(source[-1].read())
    tops = hls_interface.load(str(source[0]), params["kernels"])
    plan = connectivity.plan(tops, params["cus"], PLATFORMS[params["platform"]])
    xclbin.write(str(target[0]), connectivity.design(plan, "emu", params["library"]))
    return 0


def build(env, cfg, gen, steps) -> list:
    """Returns [torch.xclbin, torch_emu.so]."""
    emu = env.Clone()
    emu.Replace(CXX="g++")
    emu.Append(
        CPPPATH=["#kernels/hls/emu/include", "#kernels/hls/include", "#kernels/hls/emu", f"#{GEN}"],
        # -std=c++14: Vitis HLS's language level; the image unit (image.cpp) is C++14 too, since
        # every category unit includes its image.h. -faligned-new: the stream shim's std::vector
        # holds over-aligned words (a 512-bit hls::vector is alignas(64)); C++14's operator new
        # would only give 16 bytes (C++17 passes the alignment by default). -Werror=c++17-extensions:
        # g++ would accept `if constexpr`, inline variables and fold expressions in C++14 mode with
        # a mere warning; this makes a kernel that is not C++14 fail the build.
        # -ffp-contract=off: g++ must not fuse a*b+c where the kernel (and ATen) rounds twice.
        # -fno-gnu-unique: the kernel registry is an inline function's static; as a GNU unique
        # symbol the loader would share one registry among all images loaded side by side.
        # -mmove-max/-mstore-max=256: a 512-bit word (a stream's, or a vector copied between
        # stages) moves in 256-bit halves, as the stages load it; with the 128-bit moves g++ picks
        # for Zen 3, words go through the stack and general registers, and each load of a copied
        # word stalls on store forwarding (exp at 2^24: 31 -> 16 ms; docs/runtime.md).
        CXXFLAGS=["-std=c++14", "-faligned-new", "-Werror=c++17-extensions", "-O3", "-march=native",
                  "-mmove-max=256", "-mstore-max=256", "-ffp-contract=off", "-fno-gnu-unique", "-fPIC",
                  "-Wno-unknown-pragmas", "-Wno-unused-label"],
        CPPDEFINES=[("AFPGA_OPT_LEVEL", cfg.opt), ("AFPGA_CUS", cfg.cus),
                    ("AFPGA_GEMM_PE_M", cfg.gemm_pe[0]), ("AFPGA_GEMM_PE_N", cfg.gemm_pe[1])],
    )
    out = cfg.out_dir
    objs = []
    # One object per category: a template edit recompiles its category's unit and no other.
    units = [(c, unit, included) for c, (unit, included) in sorted(gen.emu_units.items())]
    for name, unit, included in units + [("image", "kernels/hls/emu/image.cpp", [])]:
        # The unary unit: no kernel reads the floating-point exception flags, so g++ may evaluate both
        # sides of afpga::math's selects and vectorize its lane loops (values are unchanged). Not
        # everywhere: it made the NaN-propagating max of the reduce kernels several times slower.
        flags = {"unary": ["-fno-trapping-math"]}.get(name)
        unit_env = emu.Clone(CXXFLAGS=emu["CXXFLAGS"] + flags) if flags else emu
        obj = unit_env.SharedObject(f"{out}/obj/{name}.os", unit)
        emu.Depends(obj, included)  # the unit #includes them (also found by the scanner once generated)
        steps.track(emu, obj, f"opt{cfg.opt}/obj/{name}", f"g++ {name}", "compile", [unit] + included,
                    unit_env.subst("$CXXFLAGS $_CPPDEFFLAGS"))
        objs += obj
    library = emu.SharedLibrary(f"{out}/{LIBRARY[:-3]}", objs, SHLIBPREFIX="", SHLIBSUFFIX=".so")
    steps.track(emu, library, f"opt{cfg.opt}/image", f"g++ -shared {LIBRARY}", "image", map(str, objs))

    params = env.Value(json.dumps({"cus": {k.name: cfg.kernel_cus(k.category) for k in gen.kernels},
                                   "platform": cfg.platform.name, "library": LIBRARY,
                                   "kernels": [k.name for k in gen.kernels]}, sort_keys=True))
    image = env.Command(f"{out}/torch.xclbin", [gen.interface, params], Action(write_xclbin, "write $TARGET"))
    env.Depends(image, env.Glob("#site_scons/afpga/*.py"))  # the writer's own code is an input
    steps.track(env, image, f"opt{cfg.opt}/xclbin", "torch.xclbin", "xclbin", [gen.interface], params.read())
    return list(image) + list(library)
