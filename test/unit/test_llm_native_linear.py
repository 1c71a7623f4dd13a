"""The native bfloat16 linear (ts/llm/engine/fastpath/native_linear.py, linear_bf16.c) alone: the
product within bfloat16's rounding at shapes that leave every remainder (rows past a tile, outputs
past a tile and a block, k past a vector and a slice), each output the same bits alone and in a
batch and on one or two threads, rows above its limit through the widened weight, and its switch.
Through the fast forward: test_llm_prepack.py, test_llm_fastpath.py and test_llm_paged.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ts.llm.engine.fastpath import native_linear

BF16 = {"atol": 2e-2, "rtol": 1.6e-2}  # a few bfloat16 ulps of outputs of size ~1
# (outputs, k): a tile and a block's remainders (3, 48), a vector's and a k slice's (8, 256)
SHAPES = [(97, 67), (50, 600), (7, 5), (144, 1030)]


@pytest.fixture(autouse=True, name="every_call_native")
def every_call_native_fixture(monkeypatch):
    """Rows past the default limit too: the kernel's own answers (the limit has its own test)."""
    monkeypatch.setenv("TS_NATIVE_LINEAR_MAX_ROWS", "all")


def linear_of(out_features: int, k: int, bias: bool) -> native_linear.NativeLinear:
    gen = torch.Generator().manual_seed(out_features * k)
    w = (torch.randn(out_features, k, generator=gen) * 0.1).to(torch.bfloat16)
    b = torch.randn(out_features, generator=gen).to(torch.bfloat16) if bias else None
    linear = native_linear.bfloat16_linear(w, b)
    if linear is None:
        pytest.fail("the native bfloat16 linear did not build (a C compiler is installed by make install)")
    return linear


def rows_of(rows: int, k: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, k, generator=torch.Generator().manual_seed(seed + rows)).to(torch.bfloat16)


def exact(linear: native_linear.NativeLinear, x: torch.Tensor) -> torch.Tensor:
    bias = linear.bias.double() if linear.bias is not None else None
    return F.linear(x.double(), linear.weight.double(), bias)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_the_product_within_bfloat16_rounding(shape, bias):
    linear = linear_of(*shape, bias)
    for rows in (1, 2, 3, 4, 5, 9, 130):
        x = rows_of(rows, shape[1])
        out = linear(x)
        assert out.dtype == torch.bfloat16 and out.shape == (rows, shape[0])
        torch.testing.assert_close(out.double(), exact(linear, x), **BF16)


@pytest.mark.parametrize("shape", SHAPES)
def test_each_output_is_the_same_bits_alone_in_a_batch_and_on_two_threads(shape):
    """What makes a sequence's tokens the same alone and batched: the order of an output's sums
    does not depend on the rows beside it or on the threads."""
    linear = linear_of(*shape, True)
    x = rows_of(130, shape[1], seed=7)  # past a chunk of k and many row tiles
    batched = linear(x)
    alone = torch.cat([linear(x[i:i + 1]) for i in range(x.shape[0])])
    assert torch.equal(batched, alone)
    assert torch.equal(linear(x[:5]), batched[:5])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert torch.equal(linear(x), batched)
    finally:
        torch.set_num_threads(threads)


def test_leading_dimensions_and_a_strided_input_are_kept():
    linear = linear_of(50, 600, True)
    x = rows_of(6, 600).reshape(2, 3, 600)
    out = linear(x)
    assert out.shape == (2, 3, 50)
    assert torch.equal(out.reshape(6, 50), linear(x.reshape(6, 600)))
    wide = rows_of(4, 1200)[:, ::2]  # every other column: not contiguous
    assert not wide.is_contiguous()
    assert torch.equal(linear(wide), linear(wide.contiguous()))


def test_nan_and_infinity_pass_through_as_f_linear_gives_them():
    linear = linear_of(7, 5, False)
    x = rows_of(3, 5)
    x[0, 1], x[1, 2] = float("nan"), float("inf")
    out, expected = linear(x), F.linear(x.float(), linear.weight.float())
    assert out[0].isnan().all() and expected[0].isnan().all()
    assert torch.equal(out[1].isinf(), expected[1].isinf()) and torch.equal(out[1].isnan(), expected[1].isnan())


def test_rows_above_the_limit_multiply_the_widened_weight(monkeypatch):
    monkeypatch.delenv("TS_NATIVE_LINEAR_MAX_ROWS")
    assert linear_of(7, 5, False).max_rows == native_linear.MAX_ROWS
    monkeypatch.setenv("TS_NATIVE_LINEAR_MAX_ROWS", "all")
    assert linear_of(7, 5, False).max_rows is None  # every call native
    monkeypatch.setenv("TS_NATIVE_LINEAR_MAX_ROWS", "4")
    linear = linear_of(97, 67, True)
    assert linear.max_rows == 4
    x = rows_of(9, 67)
    bias = linear.bias.float() if linear.bias is not None else None
    assert torch.equal(linear(x), F.linear(x.float(), linear.weight.float(), bias).to(torch.bfloat16))
    torch.testing.assert_close(linear(x[:4]).double(), exact(linear, x[:4]), **BF16)


@pytest.mark.parametrize("value", ["-1", "many", "1.5", "ALL"])
def test_a_bad_row_limit_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("TS_NATIVE_LINEAR_MAX_ROWS", value)
    with pytest.raises(ValueError, match=f"TS_NATIVE_LINEAR_MAX_ROWS='{value}': use a whole number of rows .* or all"):
        linear_of(7, 5, False)


def test_only_for_a_cpu_bfloat16_weight_and_not_when_switched_off(monkeypatch):
    w = torch.randn(8, 16)
    assert native_linear.bfloat16_linear(w, None) is None  # float32: MKL's own GEMM
    assert native_linear.bfloat16_linear(w.to(torch.bfloat16).to("meta"), None) is None
    monkeypatch.setenv("TS_NATIVE_KERNELS", "0")
    assert native_linear.bfloat16_linear(w.to(torch.bfloat16), None) is None
