"""Compiler and linker flags for code that includes ATen, from the installed torch."""
import os
import sysconfig


def torch_flags():
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        raise SystemExit("scons: torch is not installed; run `pip install torch==2.13.0` first") from None
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    abi = int(torch.compiled_with_cxx11_abi())
    return {
        "CPPPATH": cpp_extension.include_paths() + [sysconfig.get_paths()["include"]],
        "CPPDEFINES": [("_GLIBCXX_USE_CXX11_ABI", abi), ("TORCH_EXTENSION_NAME", "_C"), "TORCH_API_INCLUDE_EXTENSION_H"],
        "LIBPATH": [lib],
        "LIBS": ["c10", "torch", "torch_cpu", "torch_python"],
        "RPATH": [lib],
        "EXT_SUFFIX": sysconfig.get_config_var("EXT_SUFFIX"),
    }
