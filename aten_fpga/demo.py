"""python -m aten_fpga.demo: a few ops on device "fpga", checked against the CPU, and the stats; then
a small CNN trained a few steps on "fpga" and on the CPU from the same weights, and an FFT."""
import copy

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
    train_cnn()
    spectrum()


def train_cnn(steps: int = 5) -> None:
    """Conv2d, BatchNorm2d, ReLU, MaxPool2d, Linear and cross-entropy, trained with SGD on "fpga" and
    on the CPU from the same weights: the losses agree, and the step runs without a CPU fallback."""
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10))
    fpga_model = copy.deepcopy(cpu_model).to("fpga")
    images, labels = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))
    fpga_images, fpga_labels = images.to("fpga"), labels.to("fpga")
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.01) for m in (cpu_model, fpga_model)]
    print(f"\na small CNN, {steps} SGD steps (batch 16, 28x28): loss on the CPU and on fpga")
    for step in range(steps):
        aten_fpga.reset_stats()
        losses = []
        for model, opt, x, y in ((cpu_model, optimizers[0], images, labels),
                                 (fpga_model, optimizers[1], fpga_images, fpga_labels)):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        stats = aten_fpga.report()
        launches = sum(r["launches"] for r in stats.values())
        fallbacks = sum(r["cpu_fallback"] for r in stats.values())
        print(f"  step {step}: cpu {losses[0]:.6f}  fpga {losses[1]:.6f}   "
              f"({launches} kernel launches, {fallbacks} CPU fallbacks)")
        assert abs(losses[0] - losses[1]) <= 1e-4 * abs(losses[0]), losses
        assert fallbacks == 0, {op: r for op, r in stats.items() if r["cpu_fallback"]}


def spectrum() -> None:
    """torch.fft on "fpga": a batch of 1024-point transforms and back."""
    signal = torch.randn(64, 1024)
    aten_fpga.reset_stats()
    freq = torch.fft.rfft(signal.to("fpga"))
    back = torch.fft.irfft(freq, n=1024)
    err = (freq.cpu() - torch.fft.rfft(signal)).abs().max().item() / signal.abs().max().item()
    print(f"\ntorch.fft.rfft of 64 x 1024 on fpga: max error {err:.1e} of max |x| (pocketfft on the CPU as reference); "
          f"irfft(rfft(x)) == x: {torch.allclose(back.cpu(), signal, atol=1e-5)}; "
          f"kernel launches {sum(r['launches'] for r in aten_fpga.report().values())}")
    assert err < 1e-5 * 10 and torch.allclose(back.cpu(), signal, atol=1e-5)


if __name__ == "__main__":
    main()
