"""The `torch.backends` entry point: `import torch` loads aten_fpga through this module.

It lives outside the package so that a broken or unbuilt aten_fpga can never break `import torch`:
any failure becomes one warning that says how to build it.
"""
import warnings


def load() -> None:
    try:
        import aten_fpga  # noqa: F401
    except Exception as e:  # never let the device break `import torch`
        warnings.warn(f"aten_fpga was not loaded ({e}). Build it with `scons` in the aten_fpga checkout, "
                      "or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to skip it.", RuntimeWarning, stacklevel=2)
