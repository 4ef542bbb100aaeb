"""The installed package works away from the checkout: a user's script runs in its own folder, with
only what `pip install -e .` put on the path (the tests themselves run with the checkout first on
sys.path, which would hide a module the install left out). Each case is a fresh process started in
an empty folder, without PYTHONPATH."""
import os
import subprocess
import sys


from codegen.plan import ROOT


def run_outside(tmp_path, *args, timeout=600):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{' '.join(args)} failed outside the checkout:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def test_every_module_imports_from_the_install(tmp_path):
    """Each module of the package, and the checkout's it imports, resolve through the install, to
    this checkout."""
    out = run_outside(tmp_path, "-c", """
import importlib, pkgutil, sys
import aten_fpga
names = [m.name for m in pkgutil.walk_packages(aten_fpga.__path__, "aten_fpga.")]
for name in names:
    importlib.import_module(name)
assert "codegen" in sys.modules, "aten_fpga.compile imports codegen"
print(aten_fpga.__file__)
print(sys.modules["codegen"].__file__)
print(len(names))
""")
    package, codegen, count = out.split()
    assert package.startswith(ROOT) and codegen.startswith(ROOT), (package, codegen, ROOT)
    assert int(count) >= 10


def test_compile_backend_outside_the_checkout(tmp_path):
    out = run_outside(tmp_path, "-c", """
import torch, aten_fpga
def f(x, y):
    return torch.sigmoid(x * y + 1.0) - y
x = torch.randn(1000)
y = torch.randn(1000)
dx = torch.neg(torch.neg(x.to("fpga")))
dy = torch.neg(torch.neg(y.to("fpga")))
aten_fpga.reset_stats()
got = torch.compile(f, backend="aten_fpga")(dx, dy).cpu()
torch.testing.assert_close(got, f(x, y))
print(aten_fpga.report()["aten_fpga::fused"]["launches"])
""")
    assert out.split()[-1] == "1", out  # the chain ran as one generated kernel, not op by op


def test_conformance_outside_the_checkout(tmp_path):
    out = run_outside(tmp_path, "-m", "aten_fpga.conformance", "--quick", "--ops", "add,exp")
    assert "add" in out and "exp" in out, out


def test_demo_outside_the_checkout(tmp_path):
    out = run_outside(tmp_path, "-m", "aten_fpga.demo")
    assert "DIFFERS" not in out and out.count("bit-exact vs CPU") == 6, out
