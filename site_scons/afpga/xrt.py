"""The optional XRT device: compiled into the host extension where XRT's headers and libraries are
found (Debian's libxrt-dev: headers under /usr/include/xrt). Elsewhere the extension is built
without it and ATEN_FPGA_DEVICE=xrt says how to get it."""
import os

XRT_INCLUDE = "/usr/include/xrt"


def configure(env) -> bool:
    """Add the XRT device to a host-extension environment when XRT is installed; say which."""
    conf = env.Clone(CPPPATH=[XRT_INCLUDE], LIBS=[])
    conf = conf.Configure(log_file="build/host/.sconf_xrt/config.log", conf_dir="build/host/.sconf_xrt")
    found = (os.path.isdir(XRT_INCLUDE) and conf.CheckCXXHeader("xrt/xrt_bo.h")
             and conf.CheckLib("xrt_coreutil", language="C++", autoadd=False))
    conf.Finish()
    if found:
        env.Append(CPPPATH=[XRT_INCLUDE], CPPDEFINES=["AFPGA_WITH_XRT"], LIBS=["xrt_coreutil", "uuid"])
    return found
