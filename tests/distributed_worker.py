"""One rank of tests/test_distributed.py (runs under torchrun or with RANK/WORLD_SIZE/MASTER_* set).

    python tests/distributed_worker.py <out_dir>

Runs every collective on fpga tensors, then trains an MLP under DistributedDataParallel for 10
steps (rank 0 also trains the same MLP alone on the concatenated batch), then the last rank dies
and the others time how long all_reduce takes to fail. Each rank writes <out_dir>/rank<r>.pt with
what the test asserts.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import aten_fpga

STEPS, BATCH, IN, HIDDEN, OUT = 10, 8, 12, 16, 4
TIMEOUT_S = 10


def device() -> torch.device:
    """One rank per emulated device when the host has several (ATEN_FPGA_EMU_DEVICES)."""
    n = torch.fpga.device_count()
    return torch.device("fpga", int(os.environ["LOCAL_RANK"]) % n if n > 1 else 0)


def on_device(t: torch.Tensor, dev) -> torch.Tensor:
    # `* 1` makes the value a kernel's output: current only in device memory.
    return t.to(dev) * 1


def collectives(rank: int, size: int, dev) -> dict:
    got = {}
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    for op in ("SUM", "AVG", "MAX"):
        t = on_device(base + 10 * rank, dev)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        got[f"all_reduce_{op}"] = t.cpu()
    t = on_device(base + 10 * rank, dev) if rank == 1 else torch.zeros(2, 3, device=dev)
    dist.broadcast(t, src=1)
    got["broadcast"] = t.cpu()
    outs = [torch.zeros(2, 3, device=dev) for _ in range(size)]
    dist.all_gather(outs, on_device(base + rank, dev))
    got["all_gather"] = torch.stack([o.cpu() for o in outs])
    out = torch.zeros(2 * size, 3, device=dev)
    dist.all_gather_single(out, on_device(base + rank, dev))
    got["all_gather_single"] = out.cpu()
    out = torch.zeros(2, 3, device=dev)
    dist.reduce_scatter(out, [on_device(base * (r + 1) + rank, dev) for r in range(size)])
    got["reduce_scatter"] = out.cpu()
    out = torch.zeros(1, 3, device=dev)
    dist.reduce_scatter_single(out, on_device(base + rank, dev))
    got["reduce_scatter_single"] = out.cpu()
    dist.barrier()
    # Bytes a send/recv pair moves: the sender reads 24 B, the receiver writes 24 B.
    aten_fpga.reset_stats()
    if rank == 0:
        dist.send(on_device(base, dev), dst=1)
    else:
        t = torch.zeros(2, 3, device=dev)
        dist.recv(t, src=0)
        got["recv"] = t.cpu()
    row = aten_fpga.report().get("_copy_from", {})
    got["p2p_bytes"] = (row.get("bytes_to_host", 0), row.get("bytes_to_device", 0))
    return got


def mlp(dev) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT)).to(dev)


def train(model, batches, dev) -> dict:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(on_device(x, dev)), on_device(y, dev))
        loss.backward()
        opt.step()
    report = aten_fpga.report()  # before the weights are read back below
    return {k: v.cpu() for k, v in model.state_dict().items()}, report


def main(out_dir: str) -> None:
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    os.environ.setdefault("LOCAL_RANK", str(rank))
    # WORKER_BACKEND "" tests init_process_group() choosing the backend for the fpga accelerator.
    backend = os.environ.get("WORKER_BACKEND", "cpu:gloo,fpga:aten_fpga") or None
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    dev = device()
    result = {"device": str(dev), "backend": dist.get_backend(), "group": type(dist.group.WORLD).__name__}
    result.update(collectives(rank, size, dev))
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(BATCH * size, IN, generator=g), torch.randn(BATCH * size, OUT, generator=g)) for _ in range(STEPS)]
    mine = [(x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH]) for x, y in data]
    result["initial_0.weight"] = mlp(dev)[0].weight.cpu()
    aten_fpga.reset_stats()
    weights, result["report"] = train(torch.nn.parallel.DistributedDataParallel(mlp(dev)), mine, dev)
    result["ddp"] = {k.removeprefix("module."): v for k, v in weights.items()}
    if rank == 0:
        result["alone"], _ = train(mlp(dev), data, dev)
    save = lambda: torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    save()
    # The fault: the last rank dies without a word, as a killed host would; rank 0 keeps reducing.
    dist.barrier()
    if rank == size - 1:
        os._exit(3)
    t = on_device(torch.ones(4), dev)
    start = time.monotonic()
    try:
        for _ in range(1000):
            dist.all_reduce(t)
            time.sleep(0.01)
        result["error"] = None
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"
    result["seconds"] = time.monotonic() - start
    save()


if __name__ == "__main__":
    main(sys.argv[1])
