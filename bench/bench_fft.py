"""Batched FFTs on "fpga" (emulated) against torch on the CPU (pocketfft), in one run: 1024-point
complex64 rows, batch 4096 (the issue's case), and a few other sizes, at each XCL_OPT level that is
built; then the hardware model's projection for the same case (bench/perf_model.py --fft).

    python bench/bench_fft.py [--levels 1 2 3 4] [--batch 4096] [--sizes 256 1024 4096] [--json PATH]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, median_seconds, print_table, write_json  # noqa: E402
from perf_model import fft_main  # noqa: E402

import aten_fpga  # noqa: E402
from aten_fpga._paths import emu_image_path  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3, 4])
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "bench_fft.json"))
    args = p.parse_args(argv)
    rows = []
    for n in args.sizes:
        batch = max(1, args.batch * 1024 // n)  # the same number of samples at every size
        x = torch.complex(torch.randn(batch, n), torch.randn(batch, n))
        cpu = median_seconds(lambda: torch.fft.fft(x), args.repeat)
        for level in args.levels:
            if not os.path.exists(emu_image_path(level)):
                print(f"opt={level}: not built (scons opt={level}); skipped")
                continue
            aten_fpga.load(level)
            xd = x.to("fpga") * 1  # resident on the device, as a chain of kernels leaves it
            run = lambda: torch.view_as_real(torch.fft.fft(xd)).sum().item()  # noqa: E731  (waits for it)
            fpga = median_seconds(run, 1 if level in (2, 3) and n * batch > 1 << 20 else args.repeat)
            cpu_run = median_seconds(lambda: torch.view_as_real(torch.fft.fft(x)).sum().item(), args.repeat)
            rows.append({"n": n, "batch": batch, "level": level, "fpga_ms": fpga * 1e3, "cpu_ms": cpu_run * 1e3,
                         "cpu_fft_only_ms": cpu * 1e3, "ratio": fpga / cpu_run})
    aten_fpga.load(4) if os.path.exists(emu_image_path(4)) else None
    print(f"batched complex64 FFT on the emulator vs torch CPU ({torch.get_num_threads()} threads), "
          "fft + sum + item on both sides")
    print_table(["n", "batch", "opt", "fpga ms", "cpu ms", "fpga/cpu"],
                [[r["n"], r["batch"], r["level"], r["fpga_ms"], r["cpu_ms"], r["ratio"]] for r in rows])
    write_json(args.json, {"benchmark": "bench_fft", "machine": machine(), "rows": rows})
    fft_main(os.path.join(ROOT, "build", "bench", "perf_model_fft.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
