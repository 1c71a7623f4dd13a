"""benchmarks/paged_attention.py runs every variant, the engine's own decode part included."""

from benchmarks import paged_attention


def test_every_variant_is_timed() -> None:
    out = paged_attention.measure(rows=6, iters=1)
    assert {"gather tokens+sdpa", "gather blocks+sdpa", "rectangle", "engine decode, one gather"} <= set(out)
    assert any(k.startswith("engine decode, ") and k.endswith("width groups") for k in out)
    assert all(v > 0 for v in out.values())
