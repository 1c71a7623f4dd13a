"""The benchmark handlers, called directly as a worker would."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import models
from benchmarks.handlers import echo_handler, mlp_handler


def test_echo_returns_each_body() -> None:
    assert echo_handler.handle(None, None) is None
    assert echo_handler.handle([{"body": bytearray(b"a")}, {"data": b"b"}], None) == [b"a", b"b"]


def test_mlp_loads_weights_and_rejects_bad_bodies(tmp_path: Path) -> None:
    models.make_mlp_weights(tmp_path / "mlp.pt")
    ctx = SimpleNamespace(system_properties={"model_dir": str(tmp_path)},
                          manifest={"model": {"serializedFile": "mlp.pt"}})
    handler = mlp_handler.MLPHandler()
    handler.initialize(ctx)
    body = struct.pack("<64f", *range(64))
    out = handler.handle([{"body": body}, {"body": body}], ctx)
    assert len(out) == 2 and out[0] == out[1] and len(out[0]) == 40
    with pytest.raises(ValueError, match="request 1: body must be 64 float32 values"):
        handler.handle([{"body": body}, {"body": b"xx"}], ctx)
