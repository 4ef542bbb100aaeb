"""Build variables (`scons -h` lists them): validated at once, with the valid values in the error."""
import os

from SCons.Script import EnumVariable, Variables

TARGETS = ("emu",)
LEVELS = ("1", "2", "3", "4")


def default_cus(opt: int) -> int:
    """XCL_OPT 3 is the multi-CU level; every other level has one CU unless cus= says otherwise."""
    return 4 if opt == 3 else 1


def declare(args) -> Variables:
    v = Variables(None, args)
    v.Add(EnumVariable("target", "what to build the image for", "emu", allowed_values=TARGETS))
    v.Add(EnumVariable("opt", "XCL_OPT level: 1 buffered, 2 dataflow, 3 multi-CU, 4 vectorized", "4",
                       allowed_values=LEVELS))
    v.Add("kernels", "only these kernel categories or ops, comma separated (default: the whole table)", "")
    v.Add("cus", "compute units per kernel (default: 4 at opt=3, else 1)", "")
    return v


def cus_value(env) -> int:
    raw = env["cus"]
    if raw == "":
        return default_cus(int(env["opt"]))
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise SystemExit(f"scons: cus={raw!r} is not valid: give a whole number from 1 to 64")
    return int(raw)
