"""Helpers shared by the tests."""
import json
import os
import subprocess
import sys
import textwrap

import torch

import aten_fpga


def exact(actual, expected):
    """`actual` is an fpga tensor equal, bit for bit, to the CPU tensor `expected`."""
    assert actual.device.type == "fpga", actual.device
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape)
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def op_report(op):
    """This op's row of aten_fpga.report(), zeros if it has not run."""
    zero = {"fpga": 0, "cpu_fallback": 0, "bytes_to_device": 0, "bytes_to_host": 0}
    return {k: aten_fpga.report().get(op, zero).get(k, 0) for k in zero}


def run_python(code, timeout=180, **env):
    """Run `code` in a fresh interpreter (for settings read once per process: device count, device
    kind, memory size, fallback policy); returns the CompletedProcess. The code may print one JSON
    line last, which `last_json` reads."""
    e = dict(os.environ, **{k: str(v) for k, v in env.items()})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=e, timeout=timeout)


def last_json(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_ran(*ops: str) -> None:
    """Each op ran as an FPGA kernel, and nothing at all fell back to the CPU."""
    stats = aten_fpga.stats()
    for op in ops:
        assert stats.get(op, {}).get("fpga", 0) >= 1, (op, stats.get(op))
    fallbacks = {k: v for k, v in stats.items() if v["cpu_fallback"]}
    assert fallbacks == {}, fallbacks
