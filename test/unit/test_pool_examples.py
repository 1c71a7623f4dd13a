"""examples/pipeline: both archives build with the archiver API and give the same answers
with and without the preprocess pool."""

from __future__ import annotations

import importlib.util
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ts.protocol import codec
from ts.protocol.client import WorkerProcess
from ts.protocol.codec import FrameType, Part, Request

pytestmark = pytest.mark.slow  # builds both examples and runs their pools: left out of make test-quick

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pipeline"


def _build(kind: str, export: Path) -> Path:
    spec = importlib.util.spec_from_file_location(f"build_{kind}", EXAMPLES / kind / "build_mar.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mar = mod.build(export)
    target = export / f"{kind}-model"
    with zipfile.ZipFile(mar) as zf:
        zf.extractall(target)
    return target


def _answers(model_dir: Path, workers: int, batch: list[Request]) -> list[tuple[int, object]]:
    with WorkerProcess() as w:
        loaded = w.load({"modelName": model_dir.name, "modelPath": str(model_dir), "batchSize": 8,
                         "preprocessWorkers": workers})
        assert loaded["status"] == 200, loaded
        w.send_batch(1, batch)
        out = codec.decode_responses(w.recv_until(FrameType.RESULT, 1).body)
    return [(r.status, json.loads(r.body) if r.status == 200 else r.message) for r in out]


def _png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (60, 80, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["text", "image"])
def test_example_same_answers_with_and_without_pool(tmp_path, kind):
    model_dir = _build(kind, tmp_path)
    if kind == "text":
        batch = [Request("a", [], [Part("body", "text/plain", b"I loved the movie, great acting")]),
                 Request("b", [], [Part("body", "application/json", b'{"text": "boring and bad plot"}')])]
    else:
        batch = [Request(str(i), [], [Part("body", "image/png", _png(i))]) for i in range(3)]
    plain = _answers(model_dir, 0, batch)
    pooled = _answers(model_dir, 1, batch)
    assert all(status == 200 for status, _ in plain), plain
    assert pooled == plain
