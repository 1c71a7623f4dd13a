"""Linear weights prepared once for the CPU's GEMM (ts/llm/fastpath/prepack.py): each form gives
``F.linear``'s answer -- float32 the same bits, bfloat16 within bfloat16's rounding (widened to
float32 on a CPU without a bfloat16 GEMM or the native kernel, read in place by the native kernel,
oneDNN's reordered weight on a CPU with a bfloat16 GEMM) -- at a
decode step's rows and a prompt step's, with and without a bias; ``TS_PREPACK_LINEAR=0`` and a
non-CPU weight keep ``F.linear``. The fast forward's tokens through it: test_llm_fastpath.py and
test_llm_paged.py (bfloat16 models included)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ts.llm.engine.fastpath import prepack
from ts.llm.engine.fastpath.prepack import PackedLinear

BF16 = {"atol": 2e-2, "rtol": 1.6e-2}  # a few bfloat16 ulps of outputs of size ~1


def weights(dtype: torch.dtype, bias: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    gen = torch.Generator().manual_seed(3)
    w = (torch.randn(96, 64, generator=gen) * 0.2).to(dtype)
    return w, (torch.randn(96, generator=gen).to(dtype) if bias else None)


@pytest.mark.parametrize("rows", [1, 3, 40])
@pytest.mark.parametrize("bias", [False, True])
def test_float32_is_f_linear_bit_for_bit(rows, bias):
    w, b = weights(torch.float32, bias)
    x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(rows))
    assert torch.equal(PackedLinear(w, b)(x), F.linear(x, w, b))


@pytest.mark.parametrize("rows", [1, 3, 40])
@pytest.mark.parametrize("bias", [False, True])
def test_bfloat16_is_f_linear_within_bfloat16_rounding(rows, bias):
    w, b = weights(torch.bfloat16, bias)
    x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(rows)).to(torch.bfloat16)
    linear = PackedLinear(w, b)
    out = linear(x)
    assert out.dtype == torch.bfloat16 and out.shape == (rows, 96)
    expected = F.linear(x.double(), w.double(), None if b is None else b.double())  # exact
    torch.testing.assert_close(out.double(), expected, **BF16)
    torch.testing.assert_close(out, F.linear(x, w, b), **BF16)
    if prepack.native_bfloat16():
        assert linear.how == "oneDNN reordered bfloat16"
    else:
        assert linear.how == "bfloat16 in place, widened in registers (native kernel)"


@pytest.mark.parametrize("rows", [1, 3, 40])
@pytest.mark.parametrize("bias", [False, True])
def test_without_the_native_kernel_a_float32_copy_is_multiplied(monkeypatch, rows, bias):
    if prepack.native_bfloat16():
        pytest.skip("this CPU has a bfloat16 GEMM: the oneDNN form is used (checked above)")
    monkeypatch.setenv("TS_NATIVE_KERNELS", "0")
    w, b = weights(torch.bfloat16, bias)
    x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(rows)).to(torch.bfloat16)
    linear = PackedLinear(w, b)
    assert linear.how.startswith("bfloat16 widened to float32")
    torch.testing.assert_close(linear(x), F.linear(x, w, b), **BF16)


def test_the_widened_form_rounds_once_from_float32(monkeypatch):
    """Without a bfloat16 GEMM or the native kernel: exactly the float32 product of the bfloat16
    values, rounded."""
    if prepack.native_bfloat16():
        pytest.skip("this CPU has a bfloat16 GEMM: the oneDNN form is used (checked above)")
    monkeypatch.setenv("TS_NATIVE_KERNELS", "0")
    w, b = weights(torch.bfloat16, True)
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16)
    expected = F.linear(x.float(), w.float(), b.float()).to(torch.bfloat16)
    assert torch.equal(PackedLinear(w, b)(x), expected)


def test_switched_off_or_off_the_cpu_it_is_f_linear(monkeypatch):
    w, b = weights(torch.bfloat16, True)
    monkeypatch.setenv("TS_PREPACK_LINEAR", "0")
    linear = PackedLinear(w, b)
    x = torch.randn(5, 64).to(torch.bfloat16)
    assert linear.how == "F.linear" and torch.equal(linear(x), F.linear(x, w, b))
    monkeypatch.delenv("TS_PREPACK_LINEAR")
    meta = PackedLinear(w.to("meta"), None)  # another device: nothing prepared
    assert meta.how == "F.linear"


@pytest.mark.parametrize("rows", [1, 3, 32, 40])
@pytest.mark.parametrize("bias", [False, True])
def test_float32_packed_for_mkl_is_f_linear_bit_for_bit(monkeypatch, rows, bias):
    if not torch.backends.mkl.is_available():
        pytest.skip("torch was built without MKL: float32 weights stay F.linear's")
    monkeypatch.setenv("TS_PREPACK_LINEAR", "all")
    w, b = weights(torch.float32, bias)
    linear = PackedLinear(w, b)
    assert linear.how == "MKL packed float32"
    x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(rows))
    assert torch.equal(linear(x), F.linear(x, w, b))


def test_a_bad_switch_value_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv("TS_PREPACK_LINEAR", "yes")
    with pytest.raises(ValueError, match="TS_PREPACK_LINEAR='yes': use 0 .off., 1 .* or all"):
        PackedLinear(*weights(torch.float32, False))
