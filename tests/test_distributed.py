"""The "aten_fpga" c10d backend: collectives, DDP training and a dead rank, each a real 2-process
run on loopback (tests/distributed_worker.py is one rank). The three runs start together on first
use so their startup overlaps; every process is killed and reaped however a test ends."""
import os
import socket
import subprocess
import sys
import time

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "distributed_worker.py")
WORLD = 2
DEADLINE_S = 150  # generous: four ranks share a loaded machine; a hang still ends

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without torch.distributed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launch:
    """WORLD ranks of one scenario, with the environment torchrun would give them."""

    def __init__(self, out_dir, **env):
        self.out_dir = str(out_dir)
        port = free_port()
        self.procs = []
        for rank in range(WORLD):
            e = dict(os.environ, PYTHONPATH=ROOT, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD),
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1", **env)
            self.procs.append(subprocess.Popen([sys.executable, WORKER, self.out_dir], env=e,
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))

    def results(self) -> tuple[list[int], list[dict | None], str]:
        """Exit codes, each rank's saved results (None if it saved none) and the ranks' output."""
        end = time.monotonic() + DEADLINE_S
        logs = []
        for rank, p in enumerate(self.procs):
            try:
                out, _ = p.communicate(timeout=max(1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            logs.append(f"--- rank {rank} (exit {p.returncode})\n{out}")
        saved = []
        for rank in range(WORLD):
            path = os.path.join(self.out_dir, f"rank{rank}.pt")
            saved.append(torch.load(path, weights_only=False) if os.path.exists(path) else None)
        return [p.returncode for p in self.procs], saved, "\n".join(logs)

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    # "hosts": separate processes on fpga:0 each, as on two machines; "devices": one host with two
    # emulated devices, rank r on fpga:r, and init_process_group() left to pick the backend.
    runs = {"hosts": Launch(tmp_path_factory.mktemp("hosts")),
            "devices": Launch(tmp_path_factory.mktemp("devices"), ATEN_FPGA_EMU_DEVICES="2", WORKER_BACKEND="")}
    yield runs
    for run in runs.values():
        run.kill()


def finished(run: Launch) -> list[dict]:
    """Every rank's results; the last rank exits with 3, the fault it plays at the end."""
    codes, saved, logs = run.results()
    assert codes == [0] * (WORLD - 1) + [3] and all(saved), logs
    return saved


def expected_collectives(rank: int) -> dict:
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    ranks = range(WORLD)
    return {
        "all_reduce_SUM": sum(base + 10 * r for r in ranks),
        "all_reduce_AVG": sum(base + 10 * r for r in ranks) / WORLD,
        "all_reduce_MAX": base + 10 * (WORLD - 1),
        "broadcast": base + 10,
        "all_gather": torch.stack([base + r for r in ranks]),
        "all_gather_single": torch.cat([base + r for r in ranks]),
        "reduce_scatter": sum(base * (rank + 1) + r for r in ranks),
        "reduce_scatter_single": sum(base + r for r in ranks)[rank:rank + 1],
    }


@pytest.mark.parametrize("setup", ["hosts", "devices"])
def test_collectives(launches, setup):
    saved = finished(launches[setup])
    for rank, got in enumerate(saved):
        assert got["backend"] == ("cpu:gloo,fpga:aten_fpga" if setup == "hosts" else "undefined")
        assert got["group"] == "ProcessGroupFPGA"
        for name, want in expected_collectives(rank).items():
            torch.testing.assert_close(got[name], want, rtol=0, atol=0, msg=f"{setup} rank {rank} {name}")
    torch.testing.assert_close(saved[1]["recv"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    # send reads exactly its tensor from the device (6 floats); recv reads nothing back.
    assert saved[0]["p2p_bytes"][0] == 24 and saved[1]["p2p_bytes"][0] == 0


@pytest.mark.parametrize("setup", ["hosts", "devices"])
def test_ddp_matches_one_process_on_the_whole_batch(launches, setup):
    saved = finished(launches[setup])
    # Separate processes each use fpga:0, like hosts; with two emulated devices rank r uses fpga:r.
    assert [s["device"] for s in saved] == (["fpga:0", "fpga:0"] if setup == "hosts" else ["fpga:0", "fpga:1"])
    alone = saved[0]["alone"]
    for rank, got in enumerate(saved):
        assert got["ddp"].keys() == alone.keys()
        for name, w in alone.items():
            torch.testing.assert_close(got["ddp"][name], w, rtol=1e-5, atol=1e-6, msg=f"{setup} rank {rank} {name}")
        assert not torch.equal(got["ddp"]["0.weight"], saved[0]["initial_0.weight"])  # it trained
        # Only what the collectives read crosses to the host: the gradient bucket at each step; on
        # rank 0 (the root) also the parameters DDP broadcasts at the start, when their flattened
        # copy was last written on the device (a sync from a current shadow costs nothing).
        param_bytes = sum(w.numel() * w.element_size() for w in alone.values())
        steps = 10
        allowed = [steps * param_bytes] + ([(steps + 1) * param_bytes] if rank == 0 else [])
        assert got["report"]["_copy_from"]["bytes_to_host"] in allowed


@pytest.mark.parametrize("setup", ["hosts", "devices"])
def test_dead_rank_fails_the_others_within_the_timeout(launches, setup):
    got = finished(launches[setup])[0]
    assert got["error"] is not None and "aten_fpga: all_reduce failed on rank 0 of 2" in got["error"]
    assert "another rank died" in got["error"]
    assert got["seconds"] < 10 + 5  # the process group's timeout, plus slack for a loaded machine
