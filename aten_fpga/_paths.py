"""Where the built artifacts are: `build/` of the checkout this package sits in (an editable
install), or the folder named by ATEN_FPGA_BUILD."""
import os
import sysconfig


def build_dir() -> str:
    env = os.environ.get("ATEN_FPGA_BUILD")
    if env:
        return os.path.abspath(env)
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build")


def extension_path() -> str:
    return os.path.join(build_dir(), "host", "_C" + sysconfig.get_config_var("EXT_SUFFIX"))


def emu_image_path(level: int) -> str:
    from ._C_loader import _C  # the XCL_OPT levels of the ABI table (codegen/abi.py) the extension was built with

    if level not in _C.levels:
        raise ValueError(f"XCL_OPT level {level!r} does not exist; choose one of {tuple(_C.levels)}")
    return os.path.join(build_dir(), "emu", f"opt{level}", "torch_emu.so")
