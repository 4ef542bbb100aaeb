"""The c10d backend "aten_fpga": torch.distributed collectives on fpga tensors, over gloo.

    torch.distributed.init_process_group("cpu:gloo,fpga:aten_fpga")   # or: init_process_group()

gloo only takes CPU tensors, so each collective copies exactly the fpga tensors it reads to the
host (`tensor.cpu()`: a device->host sync counted in report()["_copy_from"]), runs the gloo
collective on those host tensors, and writes the tensors it produced back with `copy_`
(host->device, counted there too). Tensors a collective only writes (broadcast on a non-root rank,
all_gather and reduce_scatter outputs, recv) are never read from the device. CPU tensors go to
gloo untouched. Collectives complete before they return: the Work they give back is done.
"""
from __future__ import annotations

import datetime

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

BACKEND = "aten_fpga"

__all__ = ["BACKEND", "ProcessGroupFPGA", "register"]


def _to_host(t: torch.Tensor, read: bool = True) -> torch.Tensor:
    """The CPU tensor gloo works on for `t`: `t` itself on the CPU; else its bytes when the
    collective reads them, or fresh host memory when it only writes them."""
    if t.device.type == "cpu":
        return t
    if read:
        return t.cpu().contiguous()
    return torch.empty(t.shape, dtype=t.dtype)


def _write_back(dst: torch.Tensor, host: torch.Tensor) -> None:
    if dst is not host:
        dst.copy_(host)


class ProcessGroupFPGA(dist.ProcessGroup):
    """A Python c10d process group (what `register_backend` creators return for Python backends)
    whose collectives stage fpga tensors through host memory and run on a private gloo group of
    the same store, rank and size."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: datetime.timedelta):
        super().__init__(rank, size)
        # Own key prefix: a "cpu:gloo" group built from the same store must not see our keys.
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND}/", store), rank, size, timeout)
        self._timeout = timeout

    def getBackendName(self) -> str:
        return BACKEND

    def _wait(self, what: str, work: dist.Work) -> None:
        """Wait for gloo; a peer that is gone becomes an error naming the cause and the fix."""
        try:
            work.wait()
        except Exception as e:  # gloo raises on a closed connection or at its timeout
            raise dist.DistBackendError(
                f"aten_fpga: {what} failed on rank {self.rank()} of {self.size()}: another rank died "
                f"or did not join within the process group's timeout ({self._timeout.total_seconds():g} s). "
                f"Check the other ranks' output; if they are only slow, pass a larger timeout= to "
                f"init_process_group. gloo said: {e}") from e

    @staticmethod
    def _done(outputs: list[torch.Tensor]) -> dist.Work:
        """The collective already finished: a completed Work whose future holds its outputs."""
        fut = torch.futures.Future()
        fut.set_result(outputs)
        return _create_work_from_future(fut)

    @staticmethod
    def _gloo_op(op) -> tuple[dist.ReduceOp, bool]:
        """gloo has no AVG: sum, then divide on the host (the second value says so)."""
        if op == dist.ReduceOp.AVG:
            return dist.ReduceOp.SUM, True
        return op, False

    def _check_avg(self, avg: bool, tensors: list[torch.Tensor]) -> None:
        if avg and any(not (t.is_floating_point() or t.is_complex()) for t in tensors):
            raise ValueError("aten_fpga: ReduceOp.AVG needs floating-point tensors (an integer mean "
                             "would truncate); use ReduceOp.SUM and divide yourself")

    def allreduce(self, tensors, opts=None):
        opts = opts or dist.AllreduceOptions()
        op, avg = self._gloo_op(opts.reduceOp)
        self._check_avg(avg, tensors)
        hosts = [_to_host(t) for t in tensors]
        gopts = dist.AllreduceOptions()
        gopts.reduceOp = op
        gopts.timeout = opts.timeout
        self._wait("all_reduce", self._gloo.allreduce(hosts, gopts))
        for t, h in zip(tensors, hosts):
            if avg:
                h.div_(self.size())
            _write_back(t, h)
        return self._done(tensors)

    def broadcast(self, tensors, opts=None):
        opts = opts or dist.BroadcastOptions()
        root = self.rank() == opts.rootRank
        hosts = [_to_host(t, read=root) for t in tensors]
        self._wait("broadcast", self._gloo.broadcast(hosts, opts))
        if not root:
            for t, h in zip(tensors, hosts):
                _write_back(t, h)
        return self._done(tensors)

    def allgather(self, output_lists, inputs, opts=None):
        opts = opts or dist.AllgatherOptions()
        hosts_in = [_to_host(t) for t in inputs]
        hosts_out = [[_to_host(o, read=False) for o in outs] for outs in output_lists]
        self._wait("all_gather", self._gloo.allgather(hosts_out, hosts_in, opts))
        for outs, houts in zip(output_lists, hosts_out):
            for o, h in zip(outs, houts):
                _write_back(o, h)
        return self._done([o for outs in output_lists for o in outs])

    def all_gather_single(self, output, input, opts=None):
        opts = opts or dist.AllgatherOptions()
        hout, hin = _to_host(output, read=False), _to_host(input)
        self._wait("all_gather_into_tensor", self._gloo._allgather_base(hout, hin, opts))
        _write_back(output, hout)
        return self._done([output])

    _allgather_base = all_gather_single

    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        op, avg = self._gloo_op(opts.reduceOp)
        self._check_avg(avg, outputs)
        hosts_out = [_to_host(o, read=False) for o in outputs]
        hosts_in = [[_to_host(t) for t in ins] for ins in input_lists]
        gopts = dist.ReduceScatterOptions()
        gopts.reduceOp = op
        gopts.timeout = opts.timeout
        self._wait("reduce_scatter", self._gloo.reduce_scatter(hosts_out, hosts_in, gopts))
        for o, h in zip(outputs, hosts_out):
            if avg:
                h.div_(self.size())
            _write_back(o, h)
        return self._done(outputs)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        op, avg = self._gloo_op(opts.reduceOp)
        self._check_avg(avg, [output])
        hout, hin = _to_host(output, read=False), _to_host(input)
        gopts = dist.ReduceScatterOptions()
        gopts.reduceOp = op
        gopts.timeout = opts.timeout
        self._wait("reduce_scatter_tensor", self._gloo._reduce_scatter_base(hout, hin, gopts))
        if avg:
            hout.div_(self.size())
        _write_back(output, hout)
        return self._done([output])

    _reduce_scatter_base = reduce_scatter_single

    def barrier(self, opts=None):
        self._wait("barrier", self._gloo.barrier(opts or dist.BarrierOptions()))
        return self._done([])

    def send(self, tensors, dst, tag=0):
        hosts = [_to_host(t) for t in tensors]
        self._wait("send", self._gloo.send(hosts, dst, tag))
        return self._done(tensors)

    def recv(self, tensors, src, tag=0):
        hosts = [_to_host(t, read=False) for t in tensors]
        self._wait("recv", self._gloo.recv(hosts, src, tag))
        for t, h in zip(tensors, hosts):
            _write_back(t, h)
        return self._done(tensors)


def _create(store, rank, size, timeout):
    return ProcessGroupFPGA(store, rank, size, timeout)


def register() -> None:
    """Make "aten_fpga" a c10d backend name and the default backend for "fpga" tensors."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, devices=["fpga", "cpu"])
