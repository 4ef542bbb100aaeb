"""The optional XRT device: compiled into the host extension where XRT's headers and libraries are
found (Debian's libxrt-dev: headers under /usr/include/xrt). Elsewhere the extension is built
without it and ATEN_FPGA_DEVICE=xrt says how to get it.

The configure check compiles and links a test program (seconds), so its answer is kept in
build/host/xrt.json, keyed by the XRT header's timestamp: installing or removing XRT asks again."""
import json
import os

XRT_INCLUDE = "/usr/include/xrt"
CACHE = "build/host/xrt.json"


def _key():
    header = os.path.join(XRT_INCLUDE, "xrt", "xrt_bo.h")
    return os.stat(header).st_mtime_ns if os.path.exists(header) else None


def _check(env) -> bool:
    conf = env.Clone(CPPPATH=[XRT_INCLUDE], LIBS=[])
    conf = conf.Configure(log_file="build/host/.sconf_xrt/config.log", conf_dir="build/host/.sconf_xrt")
    found = (os.path.isdir(XRT_INCLUDE) and conf.CheckCXXHeader("xrt/xrt_bo.h")
             and conf.CheckLib("xrt_coreutil", language="C++", autoadd=False))
    conf.Finish()
    return bool(found)


def configure(env) -> bool:
    """Add the XRT device to a host-extension environment when XRT is installed; say which."""
    key = _key()
    try:
        with open(CACHE, encoding="utf-8") as f:
            doc = json.load(f)
        found = doc["found"] if doc["key"] == key else None
    except (FileNotFoundError, ValueError, KeyError):
        found = None
    if found is None:
        found = key is not None and _check(env)
        os.makedirs(os.path.dirname(CACHE), exist_ok=True)
        with open(CACHE, "w", encoding="utf-8") as f:
            json.dump({"key": key, "found": found}, f)
    if found:
        # A system header folder, like torch's: not scanned on every run.
        env.Append(CXXFLAGS=["-isystem", XRT_INCLUDE], CPPDEFINES=["AFPGA_WITH_XRT"], LIBS=["xrt_coreutil", "uuid"])
    return found
