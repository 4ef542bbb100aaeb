"""Loads the host extension from the build folder (generated files never live in the package)."""
import importlib.util
import os

from ._paths import extension_path


def _load():
    path = extension_path()
    if not os.path.exists(path):
        raise ImportError(f"aten_fpga's host extension is not built ({path} is missing). "
                          "Run `scons` in the aten_fpga checkout.")
    spec = importlib.util.spec_from_file_location("aten_fpga._C", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_C = _load()
