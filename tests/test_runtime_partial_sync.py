"""Partial coherence: an allocation tracks which byte ranges are newer on the host or on the device,
so a read syncs only the stale bytes its view spans (the span rounded out to 64-byte port words)
and a write marks only the bytes it wrote. Each test counts the bytes moved in aten_fpga.report() and checks every
value against the CPU, on tensors a kernel wrote (valid only in device memory)."""
from __future__ import annotations

import ctypes
import os
import random
import struct

import pytest
import torch

import aten_fpga
from runtime_support import exact, op_report

WORD = 64  # host/ps/allocator.h kWordBytes: syncs move whole port words
POISON = struct.pack("<Q", 0x7FF47FA07FA07FA0)  # host/ps/allocator.h kPoison
sanitizing = pytest.mark.skipif(os.environ.get("ATEN_FPGA_SANITIZE", "") in ("", "0"),
                                reason="needs ATEN_FPGA_SANITIZE=1 (ci/test.sh sets it)")


def on_device(cpu: torch.Tensor) -> torch.Tensor:
    """`cpu` on the fpga, written by a kernel: only the device copy holds it."""
    return cpu.to("fpga") * 1


def words(begin_byte: int, end_byte: int) -> int:
    """Bytes of the port words that [begin_byte, end_byte) touches."""
    return (end_byte + WORD - 1) // WORD * WORD - begin_byte // WORD * WORD


def test_cpu_of_one_element_moves_one_word_and_each_byte_once(fresh_stats):
    n = 1 << 20
    a = torch.randn(n)
    x = on_device(a)
    aten_fpga.reset_stats()
    one = x[12345:12346].cpu()
    assert op_report("_copy_from")["bytes_to_host"] == WORD
    torch.testing.assert_close(one, a[12345:12346], rtol=0, atol=0)
    assert x[5].item() == a[5].item()  # a sync: the word is now current on both sides
    assert op_report("_local_scalar_dense")["bytes_to_host"] == WORD
    assert x[4].item() == a[4].item()  # the same word: nothing moves
    assert op_report("_local_scalar_dense")["bytes_to_host"] == WORD
    aten_fpga.reset_stats()
    # .cpu() is a transfer into its new tensor (the shadow keeps its state): the device-newer bytes,
    # all but the word .item() synced, each moved once
    exact(x, a)
    assert op_report("_copy_from")["bytes_to_host"] + WORD == n * 4


def test_views_at_offsets_sync_their_span_only(fresh_stats):
    a = torch.randn(64, 1000)
    x = on_device(a)
    aten_fpga.reset_stats()
    exact(x[7], a[7])                  # a row: 4000 bytes from byte 28000
    assert op_report("_copy_from")["bytes_to_host"] == words(7 * 4000, 8 * 4000)
    exact(x[10:12, 3:9], a[10:12, 3:9])  # a strided block: its span, rows 10 and 11
    assert op_report("_copy_from")["bytes_to_host"] == words(7 * 4000, 8 * 4000) + words(40012, 44036)
    before = op_report("_copy_from")["bytes_to_host"]
    # A column spans nearly everything; the block's words, synced above, are current already (row 7
    # was a dense read: a transfer into its own tensor, which left the shadow as it was).
    exact(x[:, 999], a[:, 999])
    assert op_report("_copy_from")["bytes_to_host"] - before == \
        words(999 * 4, 63 * 4000 + 1000 * 4) - words(40012, 44036)


def test_a_cpu_write_into_part_of_a_device_tensor_moves_nothing(fresh_stats):
    a, p = torch.randn(100000), torch.randn(10)
    x = on_device(a)
    aten_fpga.reset_stats()
    x[50:60] = p  # dense: the other bytes keep their state, nothing is fetched first
    assert op_report("_copy_from") == {"fpga": 0, "cpu_fallback": 0, "bytes_to_device": 0, "bytes_to_host": 0}
    expected = a.clone()
    expected[50:60] = p
    y = x[40:80] + 1  # reads across the host-newer bytes: only those 40 go to the device
    assert sum(r["bytes_to_device"] for r in aten_fpga.report().values()) == 40
    exact(y, expected[40:80] + 1)
    exact(x[70000:70010], expected[70000:70010])  # another part: still from the device
    exact(x, expected)


def test_a_strided_cpu_write_fetches_its_span_first(fresh_stats):
    a, p = torch.randn(10000), torch.randn(50)
    x = on_device(a)
    aten_fpga.reset_stats()
    x[1000:1100:2] = p  # gaps: the span's other bytes must be current on the host before it
    assert op_report("_copy_from")["bytes_to_host"] == words(4000, 4396)
    expected = a.clone()
    expected[1000:1100:2] = p
    exact(x * 1, expected)


def test_a_fallback_reading_a_view_syncs_its_span(fresh_stats):
    a = torch.randn(100000)
    x = on_device(a)
    aten_fpga.reset_stats()
    y = x[1000:1010].sinc()  # no FPGA kernel: the CPU fallback reads the view
    assert op_report("sinc.out")["cpu_fallback"] == 1
    assert op_report("sinc.out")["bytes_to_host"] == words(4000, 4040)
    exact(y, a[1000:1010].sinc())


def test_kernel_chains_on_disjoint_parts_keep_each_others_bytes():
    a, b = torch.randn(4096), torch.randn(2048)
    x = a.to("fpga")                          # host newer everywhere
    torch.mul(on_device(b), 3, out=x[:2048])  # a kernel writes the first half: device newer there
    x[2048:2100] = b[:52]                     # the CPU writes part of the second half
    torch.add(x[1024:3072], 1, out=x[1024:3072])  # a kernel reads both kinds and writes across them
    expected = a.clone()
    expected[:2048] = b * 3
    expected[2048:2100] = b[:52]
    expected[1024:3072] += 1
    exact(x[::3], expected[::3])
    exact(x, expected)


@sanitizing
def test_bytes_not_synced_stay_poisoned():
    a = torch.randn(4096)
    x = on_device(a)
    assert x[1000].item() == a[1000].item()  # moves the word holding element 1000
    host = ctypes.string_at(x.data_ptr(), 4096 * 4)
    word = 1000 * 4 // WORD * WORD
    assert host[word:word + WORD] == a.numpy().tobytes()[word:word + WORD]
    assert host[:word] == (POISON * (word // 8))  # a stale read there sees NaNs, not old values
    assert host[word + WORD:] == POISON * ((len(host) - word - WORD) // 8)
    x[10:20] = torch.zeros(10)                # host newer at bytes 40..80: the device copy is poisoned
    torch.testing.assert_close((x[8:24] + 0).cpu(), torch.cat([a[8:10], torch.zeros(10), a[20:24]]), rtol=0, atol=0)


@pytest.mark.parametrize("seed", range(6))
def test_random_partial_writes_and_reads(seed):
    """Random host writes, kernel writes and reads of random ranges of one storage (more ranges than
    the allocator keeps apart, so it must join them), against a CPU mirror."""
    rng = random.Random(seed)
    n = 3000
    mirror = torch.randn(n)
    x = on_device(mirror)
    for _ in range(120):
        lo = rng.randrange(n - 1)
        hi = rng.randrange(lo + 1, min(n, lo + 200) + 1)
        step = rng.choice([1, 1, 1, 3])
        kind = rng.choice(["host", "kernel", "read", "fallback", "item"])
        if kind == "host":
            v = torch.randn(len(range(lo, hi, step)))
            x[lo:hi:step] = v
            mirror[lo:hi:step] = v
        elif kind == "kernel":
            x[lo:hi:step].mul_(-2).add_(1)
            mirror[lo:hi:step].mul_(-2).add_(1)
        elif kind == "fallback":
            x[lo:hi:step] = x[lo:hi:step].sinc()
            mirror[lo:hi:step] = mirror[lo:hi:step].sinc()
        elif kind == "item":
            assert x[lo].item() == mirror[lo].item()
        else:
            exact(x[lo:hi:step], mirror[lo:hi:step])
    exact(x * 1, mirror)
    exact(x, mirror)
