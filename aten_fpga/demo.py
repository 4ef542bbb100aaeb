"""python -m aten_fpga.demo: a few ops on device "fpga", checked against the CPU, and the stats."""
import torch

import aten_fpga


def main() -> None:
    torch.manual_seed(0)
    print(f"device image: {aten_fpga.image()}")
    aten_fpga.reset_stats()
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    x, y = a.to("fpga"), b.to("fpga")
    results = {
        "x + y": (x + y, a + b),
        "x * y": (x * y, a * b),
        "x + 2 * y (alpha)": (torch.add(x, y, alpha=2), torch.add(a, b, alpha=2)),
        "x.t() * y.t() (strided)": (x.t() * y.t(), a.t() * b.t()),
        "x[:, :1] + y[:1] (broadcast)": (x[:, :1] + y[:1], a[:, :1] + b[:1]),
        "x.sum(0) (reduction)": (x.sum(0), a.sum(0)),
        "exp(x) (transcendental, within 1 ulp)": (torch.exp(x), torch.exp(a)),
        "lgamma(x) (no kernel: CPU fallback)": (torch.lgamma(x), torch.lgamma(a)),
    }
    exact_ops = {name for name in results if "ulp" not in name and "reduction" not in name}
    # What the computation ran where (printing below runs ops of its own, through the fallback).
    computed = aten_fpga.format_stats()
    for name, (on_fpga, on_cpu) in results.items():
        if name in exact_ops:
            same, how = torch.equal(on_fpga.cpu(), on_cpu), "bit-exact"
        else:
            same, how = torch.allclose(on_fpga.cpu(), on_cpu), "close"
        print(f"\n{name}  [{how if same else 'DIFFERS'} vs CPU]\n{on_fpga}")
        assert same, name
    print("\nper-op stats of the computation:")
    print(computed)


if __name__ == "__main__":
    main()
