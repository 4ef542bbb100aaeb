"""The host extension aten_fpga._C: host/ps/*.cpp and the generated FPGAType units, against the
installed torch. Separate from the image: `scons target=hw` builds the xclbin without it."""
from __future__ import annotations

import os

from . import xrt
from .torch_flags import torch_flags

OUT = "build/host"


def build(env, gen) -> list:
    tf = torch_flags()
    host = env.Clone()
    host.Append(
        CPPPATH=["#host/ps", f"#{os.path.dirname(gen.fpga_type[0])}", "#kernels/hls/emu"],
        CPPDEFINES=tf["CPPDEFINES"],
        # torch's headers as system headers: SCons does not scan (or record) its thousands of
        # headers on every run; the torch version below stands for them.
        CXXFLAGS=["-std=c++20", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wno-unused-function"]
                 + [f for d in tf["CPPPATH"] for f in ("-isystem", d)],
        LIBPATH=tf["LIBPATH"], LIBS=tf["LIBS"] + ["dl", "pthread"], RPATH=tf["RPATH"],
    )
    xrt.configure(host)  # the XRT device, where libxrt-dev is installed
    objs = [host.SharedObject(f"{OUT}/obj/{os.path.basename(str(s))[:-4]}.os", s)
            for s in sorted(host.Glob("#host/ps/*.cpp"), key=str)]
    objs += [host.SharedObject(f"{OUT}/obj/{os.path.basename(f)[:-4]}.os", f) for f in gen.fpga_type if f.endswith(".cpp")]
    host.Depends(objs, gen.fpga_type + [host.Value(tf["VERSION"])])
    return host.SharedLibrary(f"{OUT}/_C", objs, SHLIBPREFIX="", SHLIBSUFFIX=tf["EXT_SUFFIX"])
