"""Request envelopes (body, json, kserve, kservev2) wrapped around a handler entry point."""

from __future__ import annotations

import base64
import json

import pytest

from ts.context import Context, RequestProcessor
from ts.model_loader import LoadError, wrap_envelope
from ts.utils.util import PredictionException


def ctx_for(n: int, headers: list[dict] | None = None) -> Context:
    ctx = Context("m", "/m", {"model": {"modelName": "m", "modelVersion": "2.0"}}, n, None, "x")
    ctx.set_batch({i: f"r{i}" for i in range(n)}, [RequestProcessor((headers or [{}] * n)[i]) for i in range(n)])
    return ctx


def doubler(data, context):
    return [x * 2 if not isinstance(x, dict) else {k: v for k, v in x.items()} for x in data]


def test_body_envelope_passes_through():
    entry = wrap_envelope(doubler, "body")
    assert entry([3, 4], ctx_for(2)) == [6, 8]


def test_json_envelope_instances_and_b64():
    seen = []

    def handler(data, context):
        seen.append(list(data))
        return [len(x) if isinstance(x, bytes) else x * 10 for x in data]

    entry = wrap_envelope(handler, "json")
    rows = [{"body": {"instances": [1, 2]}},
            {"body": json.dumps({"instances": [{"b64": base64.b64encode(b"abc").decode()}]}).encode()}]
    out = entry(rows, ctx_for(2))
    assert seen == [[1, 2, b"abc"]]
    assert [json.loads(o) for o in out] == [{"predictions": [10, 20]}, {"predictions": [3]}]


def test_json_envelope_rejects_bodies_without_instances():
    with pytest.raises(PredictionException, match='needs the key "instances"') as err:
        wrap_envelope(doubler, "json")([{"body": {"x": 1}}], ctx_for(1))
    assert err.value.error_code == 400


@pytest.mark.parametrize(("envelope", "key", "body"), [
    ("kserve", "instances", {"inputs": [1]}),
    ("kservev2", "inputs", {"instances": [1]}),
])
def test_kserve_bodies_without_their_key_are_400_naming_it(envelope, key, body):
    called = []
    entry = wrap_envelope(lambda d, c: called.append(d) or d, envelope)
    with pytest.raises(PredictionException, match=f'needs the key "{key}"') as err:
        entry([{"body": json.dumps(body).encode()}], ctx_for(1))
    assert err.value.error_code == 400
    assert called == []  # the handler never sees a malformed request


@pytest.mark.parametrize("envelope", ["kserve", "kservev2"])
def test_kserve_non_json_and_wrong_types_are_400(envelope):
    entry = wrap_envelope(doubler, envelope)
    for body in (b"not json", b"[1, 2]", json.dumps({"instances": 3, "inputs": 3}).encode()):
        with pytest.raises(PredictionException) as err:
            entry([{"body": body}], ctx_for(1))
        assert err.value.error_code == 400, body


def test_malformed_kserve_request_is_a_400_batch_error():
    from ts.service import classify_exception

    entry = wrap_envelope(doubler, "kservev2")
    with pytest.raises(PredictionException) as err:
        entry([{"body": b"{}"}], ctx_for(1))
    batch_error = classify_exception(err.value, "m")
    assert batch_error.status == 400 and '"inputs"' in batch_error.message


def test_kserve_v1_predictions_and_explanations():
    entry = wrap_envelope(lambda d, c: [x + 1 for x in d], "kserve")
    out = entry([{"body": {"instances": [1, 2]}}, {"data": {"instances": [5]}}],
                ctx_for(2, [{"explain": "False"}, {"explain": "True"}]))
    assert out == [{"predictions": [2, 3]}, {"explanations": [6]}]


def test_kserve_v2_inputs_and_outputs():
    seen = []

    def handler(data, context):
        seen.extend(data)
        return [[[float(v) * 2 for v in inp["data"]]] for inp in data]

    entry = wrap_envelope(handler, "kservev2")
    body = {"id": "req-7", "inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1, 2]}]}
    out = entry([{"body": json.dumps(body)}], ctx_for(1))
    assert seen[0]["name"] == "x"
    assert out == [{"id": "req-7", "model_name": "m", "model_version": "2.0",
                    "outputs": [{"name": "x", "shape": [1, 2], "datatype": "FP64", "data": [2.0, 4.0]}]}]


def test_unknown_envelope_is_a_load_error():
    with pytest.raises(LoadError, match="unknown envelope 'soap'"):
        wrap_envelope(doubler, "soap")
