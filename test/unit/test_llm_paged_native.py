"""The paged cache's native decode attention (ts/llm/engine/paged/native.py, paged_decode.c) alone: its
output against the block gather into SDPA it replaces, over float32 and bfloat16 pools with
shuffled blocks, grouped query heads, one-token and block-boundary lengths, on one thread and two;
the engine's decode part through it against the gather; then how it is built, cached and declined
(another device or dtype, ``TS_NATIVE_KERNELS=0``, no compiler, a failing compiler), each a
clear log line and the gather instead, never an error. The engine's tokens through the kernel:
test_llm_paged.py (``attention``)."""

from __future__ import annotations

import logging
import shutil

import pytest
import torch
import torch.nn.functional as F

from ts.llm.engine import native as builder
from ts.llm.engine.paged import native


def kernel_for(dtype):
    kernel = native.decode_kernel(torch.device("cpu"), dtype)
    assert kernel is not None, "the native kernel did not build (a C compiler is part of the test machine)"
    return kernel


@pytest.fixture(name="kernel")
def kernel_fixture():
    return kernel_for(torch.float32)


def gathered(q, keys, values, table, lengths, scale):
    """The reference: each row's blocks gathered, padded to the widest, masked to its length."""
    rows, heads, dim = q.shape
    kv_heads, span = keys.shape[2], table.shape[1] * keys.shape[1]
    k = keys.index_select(0, table.reshape(-1)).view(rows, span, kv_heads, dim).transpose(1, 2)
    v = values.index_select(0, table.reshape(-1)).view(rows, span, kv_heads, dim).transpose(1, 2)
    k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
    mask = (torch.arange(span) < lengths.unsqueeze(1)).view(rows, 1, 1, span)
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, attn_mask=mask, scale=scale).squeeze(2)


@pytest.mark.parametrize(("heads", "kv_heads", "dim", "block_size"),
                         [(4, 2, 64, 16), (4, 4, 32, 4), (8, 1, 16, 8), (2, 2, 128, 16)])
def test_the_kernel_equals_the_gather_into_sdpa(kernel, heads, kv_heads, dim, block_size):
    gen = torch.Generator().manual_seed(heads * 1000 + dim + block_size)
    lengths = [1, block_size, block_size + 1, 3 * block_size, 5, 2 * block_size - 1, 7 * block_size + 3, 2, 9, 40]
    widest = max(-(-n // block_size) for n in lengths)
    num_blocks = len(lengths) * widest + 3
    keys = torch.randn(num_blocks, block_size, kv_heads, dim, generator=gen)
    values = torch.randn(num_blocks, block_size, kv_heads, dim, generator=gen)
    order = torch.randperm(num_blocks, generator=gen).tolist()  # blocks anywhere in the pool
    rows = []
    for n in lengths:
        own, order = order[:-(-n // block_size)], order[-(-n // block_size):]
        rows.append(own + [0] * (widest - len(own)))
    table, lens = torch.tensor(rows), torch.tensor(lengths)
    q = torch.randn(len(lengths), heads, dim, generator=gen)
    scale = dim ** -0.5
    out = kernel(q, keys, values, table, lens, scale)
    assert out.shape == q.shape
    torch.testing.assert_close(out, gathered(q, keys, values, table, lens, scale), rtol=1e-5, atol=1e-5)
    one = kernel(q[:1], keys, values, table[:1], lens[:1], scale)  # a length-1 row attends to one value
    torch.testing.assert_close(one[0], values[table[0, 0], 0].repeat_interleave(heads // kv_heads, dim=0))
    strided = q.transpose(0, 1).contiguous().transpose(0, 1)  # what the engine hands it: not contiguous
    torch.testing.assert_close(kernel(strided, keys, values, table, lens, scale), out)
    threads = torch.get_num_threads()
    try:  # the rows shared among two of torch's threads: the same bits row by row
        torch.set_num_threads(2)
        assert torch.equal(kernel(q, keys, values, table, lens, scale), out)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("scale", [1e-4, 1.0, 40.0])
def test_the_kernels_softmax_holds_for_flat_and_peaked_scores(kernel, scale):
    """The kernel's own exp: near-equal scores (a flat softmax) and scores hundreds apart (one
    token takes all, the others' weights underflow) give SDPA's answer."""
    gen = torch.Generator().manual_seed(7)
    lengths, block_size, heads, kv_heads, dim = [37, 64, 5, 100], 16, 4, 2, 64
    widest = max(-(-n // block_size) for n in lengths)
    keys = torch.randn(len(lengths) * widest, block_size, kv_heads, dim, generator=gen)
    values = torch.randn(len(lengths) * widest, block_size, kv_heads, dim, generator=gen)
    table = torch.arange(len(lengths) * widest).view(len(lengths), widest)
    lens, q = torch.tensor(lengths), torch.randn(len(lengths), heads, dim, generator=gen)
    out = kernel(q, keys, values, table, lens, scale)
    torch.testing.assert_close(out, gathered(q, keys, values, table, lens, scale), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [3, 12])  # one thread, and rows shared among two
def test_a_bfloat16_pool_is_read_as_float32(rows):
    """bfloat16 keys/values widened as read, float32 arithmetic, the output rounded once: the
    float32 computation over the same bfloat16 values, rounded."""
    gen = torch.Generator().manual_seed(rows)
    keys = torch.randn(40, 16, 2, 64, generator=gen).to(torch.bfloat16)
    values = torch.randn(40, 16, 2, 64, generator=gen).to(torch.bfloat16)
    table = torch.randperm(40, generator=gen)[:rows * 3].view(rows, 3)
    lengths = torch.randint(1, 49, (rows,), generator=gen)
    q = torch.randn(rows, 4, 64, generator=gen).to(torch.bfloat16)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        out = kernel_for(torch.bfloat16)(q, keys, values, table, lengths, 0.125)
    finally:
        torch.set_num_threads(threads)
    assert out.dtype == torch.bfloat16
    expected = gathered(q.float(), keys.float(), values.float(), table, lengths, 0.125).to(torch.bfloat16)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_engines_decode_part_through_the_kernel_equals_the_gather(dtype):
    """``PagedDecode`` (ts/llm/engine/paged/parts.py) as the fast forward calls it: its keys written
    into the pool, then attention through the kernel and through the block gather."""
    from ts.llm.engine.paged.parts import PagedDecode
    from ts.llm.engine.paged.storage import KVStorage

    class Forward:  # the fast forward's sizes and SDPA call (ts/llm/engine/fastpath/llama.py)
        kv_heads, head_dim, q_size, scale = 2, 32, 4 * 32, 32 ** -0.5

        def attention(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q.reshape(q.shape[0], 2, 2, 32), k, v, attn_mask=mask,
                                                  scale=self.scale)

    gen = torch.Generator().manual_seed(7)
    tables = [[3, 9], [1], [4, 0, 6], [8, 2]]
    positions = [17, 2, 40, 31]  # each row's new token, written by the call
    outs = []
    for kernel in (kernel_for(dtype), None):
        storage = KVStorage(1, 10, 16, kernel)
        storage.keys = [torch.randn(10, 16, 2, 32, generator=torch.Generator().manual_seed(1)).to(dtype)]
        storage.values = [torch.randn(10, 16, 2, 32, generator=torch.Generator().manual_seed(2)).to(dtype)]
        part = PagedDecode(storage, [0] * 4, positions, tables, torch.device("cpu"))
        q, k, v = (torch.randn(1, h, 4, 32, generator=gen.manual_seed(h)).to(dtype) for h in (4, 2, 3))
        outs.append(part.attend(Forward(), 0, q, k[:, :2], v[:, :2]))
    assert outs[0].shape == (4, 4 * 32) and outs[0].dtype == dtype
    # bfloat16: SDPA rounds its intermediates to bfloat16, the kernel only its output
    tolerance = {"atol": 4e-3, "rtol": 1.6e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(outs[0], outs[1], **tolerance)


def test_only_a_cpu_float32_or_bfloat16_pool_and_the_switch_off(monkeypatch):
    assert native.decode_kernel(torch.device("cpu"), torch.float16) is None
    assert native.decode_kernel(torch.device("cuda"), torch.float32) is None
    monkeypatch.setenv("TS_NATIVE_KERNELS", "0")
    assert native.decode_kernel(torch.device("cpu"), torch.float32) is None


@pytest.fixture(name="fresh")
def fresh_fixture(tmp_path, monkeypatch):
    """An empty kernel cache and nothing loaded yet in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(builder, "_loaded", {})
    return tmp_path / "tserve" / "kernels"


def test_built_once_then_loaded_from_the_cache(fresh, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=builder.__name__)
    assert native.decode_kernel(torch.device("cpu"), torch.float32) is not None
    built = list(fresh.glob("paged_decode-*.so"))
    assert len(built) == 1 and "built the native kernel" in caplog.text
    assert not [p for p in fresh.iterdir() if p not in built]  # no temporary file left behind

    def no_build(cc, kernel, path):
        raise AssertionError("built again")

    monkeypatch.setattr(builder, "_build", no_build)
    monkeypatch.setattr(builder, "_loaded", {})
    kernel = native.decode_kernel(torch.device("cpu"), torch.float32)
    assert kernel is not None and kernel.path == built[0]


def test_no_compiler_or_a_failing_one_falls_back_with_one_line(fresh, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=builder.__name__)
    monkeypatch.setenv("CC", "no-such-compiler-here")
    assert native.decode_kernel(torch.device("cpu"), torch.float32) is None
    assert "no C compiler (no-such-compiler-here) found" in caplog.text
    caplog.clear()
    monkeypatch.setattr(builder, "_loaded", {})
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    assert native.decode_kernel(torch.device("cpu"), torch.float32) is None
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert f"the native kernel is unavailable ({shutil.which('false')} exited with 1: no output)" in record.getMessage()
    assert record.exc_info is None
    assert not list(fresh.glob("*"))  # the failed build left nothing


def test_a_compiler_without_openmp_builds_it_serially(fresh, tmp_path, monkeypatch, caplog):
    """Apple's clang has no -fopenmp: the build is tried again without it."""
    cc = tmp_path / "cc-without-openmp"
    cc.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = -fopenmp ] && {{ echo "unsupported option -fopenmp" >&2; exit 1; }}; '
                  f'done\nexec {shutil.which("cc")} "$@"\n')
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    caplog.set_level(logging.INFO, logger=builder.__name__)
    kernel = native.decode_kernel(torch.device("cpu"), torch.float32)
    assert kernel is not None and "one thread: the compiler has no OpenMP" in caplog.text
    q, keys = torch.randn(1, 2, 8), torch.randn(1, 4, 1, 8)
    out = kernel(q, keys, keys, torch.zeros(1, 1, dtype=torch.long), torch.tensor([3]), 1.0)
    torch.testing.assert_close(out, gathered(q, keys, keys, torch.zeros(1, 1, dtype=torch.long), torch.tensor([3]), 1.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_peaked_attention_whose_tail_weights_are_subnormal_is_exact_and_leaves_the_fp_mode_alone(dtype):
    """A peaked model's softmax: one key far ahead, the others' weights e^-90 .. e^-110 (below
    float's smallest normal, 2^-126 ~ e^-87: subnormal or zero in float32). The kernel flushes
    those to zero (the tail adds less than 2^-126 of a value) and gives the float64 answer; the
    flush is the kernel's own, not left on for the process afterwards."""
    gen = torch.Generator().manual_seed(11)
    block_size, kv_heads, heads, dim, n = 16, 2, 4, 64, 48
    keys = torch.randn(3, block_size, kv_heads, dim, generator=gen) * 0.01
    values = torch.randn(3, block_size, kv_heads, dim, generator=gen)
    q = torch.zeros(2, heads, dim)
    q[:, :, 0] = 1.0
    keys[:, :, :, 0] = -torch.linspace(90, 110, 3 * block_size).view(3, block_size, 1)  # scores -90 .. -110
    keys[1, 5, :, 0] = 0.0  # the peak: token 21 of each row
    keys, values, q = keys.to(dtype), values.to(dtype), q.to(dtype)
    table, lengths = torch.tensor([[0, 1, 2], [2, 1, 0]]), torch.tensor([n, 40])
    out = kernel_for(dtype)(q, keys, values, table, lengths, 1.0)
    expected = gathered(q.double(), keys.double(), values.double(), table, lengths, 1.0)
    torch.testing.assert_close(out.double(), expected.to(dtype).double(), rtol=0, atol=0)
    tiny = torch.tensor([1e-38]) * torch.tensor([1e-3])
    assert tiny.item() != 0.0, "flush-to-zero was left on for the process"
