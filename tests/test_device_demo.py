"""The README's demo runs: its results match the CPU (it asserts that itself), its stats show
kernels and the fallback where the demo says they run, and its CNN trains without a fallback."""
import aten_fpga
from aten_fpga import demo


def test_demo_runs_and_says_what_ran_where(capsys):
    demo.main()
    out = capsys.readouterr().out
    assert "DIFFERS" not in out and out.count("bit-exact vs CPU") == 6
    stats_table = out.split("per-op stats of the computation:")[1].split("\n\n")[0]
    rows = {line.split()[0]: line.split()[1:] for line in stats_table.strip().splitlines()[1:]}
    assert rows["add.out"] == ["3", "0"] and rows["mul.out"] == ["2", "0"] and rows["exp.out"] == ["1", "0"]
    assert rows["lgamma.out"] == ["0", "1"] and rows["sum.IntList_out"] == ["1", "0"]
    assert "/emu/opt4/" in aten_fpga.image()
    # The CNN trains on fpga like on the CPU (the demo asserts the losses) without a fallback, and the FFT round-trips.
    assert out.count(", 0 CPU fallbacks)") == 5 and "irfft(rfft(x)) == x: True" in out
