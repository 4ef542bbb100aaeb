"""target=emu: the generated HLS sources compiled with g++ (our HLS shims on the include path)
into build/emu/opt<N>/torch_emu.so, described by torch.xclbin beside it -- the same container a
v++ build produces, so the host discovers kernels and compute units the same way for both."""
from __future__ import annotations

import json
import os

from codegen.emu_flags import UNIT_CXXFLAGS, emu_cxxflags
from codegen.engines import NARROW
from SCons.Script import Action

from . import connectivity, hls_interface, xclbin
from .gen import GEN

LIBRARY = "torch_emu.so"


def write_xclbin(target, source, env):
    from .platforms import PLATFORMS

    params = json.loads(source[-1].read())
    tops = hls_interface.load(str(source[0]), params["kernels"])
    plan = connectivity.plan(tops, params["cus"], PLATFORMS[params["platform"]])
    with open(str(source[1]), encoding="utf-8") as f:
        members = f.read()  # the engines' member table (codegen/engines.py), which the host resolves
    xclbin.write(str(target[0]), connectivity.design(plan, "emu", params["library"], members))
    return 0


def build(env, cfg, gen, steps) -> list:
    """Returns [torch.xclbin, torch_emu.so]."""
    emu = env.Clone()
    emu.Replace(CXX="g++")
    emu.Append(
        CPPPATH=["#kernels/hls/emu/include", "#kernels/hls/include", "#kernels/hls/emu", f"#{GEN}"],
        CXXFLAGS=list(emu_cxxflags(cfg.march)),  # codegen/emu_flags.py says why each
        CPPDEFINES=[("AFPGA_OPT_LEVEL", cfg.opt), ("AFPGA_CUS", cfg.cus)],
    )
    # the PE array's size is the GEMM's alone: another gemm_pe= recompiles its unit and no other
    gemm_defines = [("AFPGA_GEMM_PE_M", cfg.gemm_pe[0]), ("AFPGA_GEMM_PE_N", cfg.gemm_pe[1])]
    out = cfg.out_dir
    objs = []
    # One object per category: a template edit recompiles its category's unit and no other.
    units = [(c, unit, included) for c, (unit, included) in sorted(gen.emu_units.items())]
    for name, unit, included in units + [("image", "kernels/hls/emu/image.cpp", [])]:
        category = name.removesuffix(NARROW)
        flags = UNIT_CXXFLAGS.get(category, ())
        defines = gemm_defines if category == "gemm" else []
        unit_env = emu.Clone(CXXFLAGS=emu["CXXFLAGS"] + list(flags),
                             CPPDEFINES=emu["CPPDEFINES"] + defines) if flags or defines else emu
        obj = unit_env.SharedObject(f"{out}/obj/{name}.os", unit)
        emu.Depends(obj, included)  # the unit #includes them (also found by the scanner once generated)
        steps.track(emu, obj, f"{cfg.level_dir}/obj/{name}", f"g++ {name}", "compile", [unit] + included,
                    unit_env.subst("$CXXFLAGS $_CPPDEFFLAGS"))
        objs += obj
    library = emu.SharedLibrary(f"{out}/{LIBRARY[:-3]}", objs, SHLIBPREFIX="", SHLIBSUFFIX=".so")
    steps.track(emu, library, f"{cfg.level_dir}/image", f"g++ -shared {LIBRARY}", "image", map(str, objs))

    params = env.Value(json.dumps({"cus": {k.name: cfg.engine_cus(k) for k in gen.kernels},
                                   "platform": cfg.platform.name, "library": LIBRARY,
                                   "kernels": [k.name for k in gen.kernels]}, sort_keys=True))
    image = env.Command(f"{out}/torch.xclbin", [gen.interface, gen.members, params],
                        Action(write_xclbin, "write $TARGET"))
    env.Depends(image, env.Glob("#site_scons/afpga/*.py"))  # the writer's own code is an input
    steps.track(env, image, f"{cfg.level_dir}/xclbin", "torch.xclbin", "xclbin", [gen.interface], params.read())
    return list(image) + list(library)
