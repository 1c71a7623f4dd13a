"""Context, RequestProcessor and the handler metrics API."""

from __future__ import annotations

import pytest

from ts.context import Context, RequestProcessor
from ts.metrics.dimension import Dimension
from ts.metrics.metric_cache_errors import MetricsCacheKeyError, MetricsCacheValueError
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl
from ts.metrics.metric_type_enum import MetricTypes
from ts.protocol.codec import Part, Request
from ts.service import decode_batch


def make_context(metrics_config: str | None = None) -> Context:
    metrics = MetricsCacheYamlImpl(metrics_config, "m")
    ctx = Context("m", "/models/m", {"model": {"modelName": "m"}}, 4, None, "0.1", True, metrics,
                  {"handler": {"k": 1}}, rank=1, local_rank=1, world_size=2, device="cpu")
    ctx.set_batch({0: "r0", 1: "r1"}, [RequestProcessor({"x": "1"}), RequestProcessor({"ts_request_sequence_id": "s9"})])
    return ctx


def test_system_properties_and_extras():
    ctx = make_context()
    assert ctx.system_properties == {"model_dir": "/models/m", "gpu_id": None, "batch_size": 4,
                                     "server_name": "MMS", "server_version": "0.1",
                                     "limit_max_image_pixels": True}
    assert ctx.model_yaml_config == {"handler": {"k": 1}}
    assert (ctx.rank, ctx.local_rank, ctx.world_size, ctx.device) == (1, 1, 2, "cpu")
    assert ctx.manifest["model"]["modelName"] == "m"


def test_request_and_response_accessors():
    ctx = make_context()
    assert ctx.get_request_id(1) == "r1"
    assert ctx.get_request_header(0, "x") == "1"
    assert ctx.get_all_request_header(0) == {"x": "1"}
    assert ctx.get_sequence_id(1) == "s9"
    ctx.set_response_status(201, "Created", 1)
    assert ctx.get_response_status(1) == (201, "Created")
    assert ctx.get_response_status(0) == (200, None)
    ctx.set_all_response_status(429, "slow down")
    assert ctx.get_response_status(0) == (429, "slow down")
    ctx.set_response_content_type(0, "text/csv")
    ctx.set_response_header(0, "x-a", "b")
    assert ctx.get_response_content_type(0) == "text/csv"
    assert ctx.get_response_headers(0) == {"content-type": "text/csv", "x-a": "b"}
    with pytest.raises(IndexError, match="out of range for a batch of 2"):
        ctx.get_request_header(5, "x")


def test_decode_batch_matches_torchserve(monkeypatch):
    reqs = [Request("a", [("h", "v")], [Part("body", "application/json", b'{"a": 1}'),
                                        Part("t", "text/plain", "é".encode()), Part("f", "", b"\x00")])]
    data, ids, procs = decode_batch(reqs)
    assert data == [{"body": {"a": 1}, "t": "é", "f": b"\x00"}]
    assert ids == {0: "a"}
    assert procs[0].get_request_properties() == {"h": "v", "body": {"content-type": "application/json"},
                                                 "t": {"content-type": "text/plain"}, "f": {"content-type": ""}}
    param = decode_batch([Request("p", [], [Part("f", "application/json; charset=utf-8", b"[1]")])])[0]
    assert param == [{"f": [1]}]
    monkeypatch.setenv("TS_DECODE_INPUT_REQUEST", "false")
    data, _, _ = decode_batch(reqs)
    assert data == [{"body": b'{"a": 1}', "t": "é".encode(), "f": b"\x00"}]


def test_metrics_api_records_with_default_dimensions():
    ctx = make_context()
    m = ctx.metrics
    m.add_counter("Hits", 2, idx=1)
    m.add_time("Lat", 1.5)
    m.add_size("Mem", 3, unit="GB")
    m.add_percent("Util", 50, dimensions=[Dimension("Gpu", "0")])
    m.add_error("Oops", 1)
    m.add_metric("Raw", 7, "items", metric_type=MetricTypes.HISTOGRAM)
    recs = {r["name"]: r for r in m.drain()}
    assert recs["Hits"] == {"name": "Hits", "unit": "Count", "value": 2, "type": "counter",
                            "dimensions": {"ModelName": "m", "Level": "Model"}, "requestId": "r1"}
    assert recs["Lat"]["unit"] == "Milliseconds" and recs["Lat"]["type"] == "gauge"
    assert recs["Lat"]["requestId"] == "r0,r1"
    assert recs["Mem"]["unit"] == "Gigabytes"
    assert recs["Util"]["dimensions"] == {"Gpu": "0", "ModelName": "m", "Level": "Model"}
    assert recs["Oops"]["dimensions"]["Level"] == "Error"
    assert recs["Raw"]["type"] == "histogram" and recs["Raw"]["unit"] == "items"
    assert m.drain() == []


def test_default_dimensions_follow_the_model_name():
    """add_metric keeps the default dimensions between calls; a renamed model gets its own."""
    m = make_context().metrics
    m.add_time("Lat", 1.0)
    m.model_name = "renamed"
    m.add_time("Lat", 2.0)
    m.add_time("Lat", 3.0, dimensions=[Dimension("Level", "Host")])
    dims = [r["dimensions"] for r in m.drain()]
    assert dims == [{"ModelName": "m", "Level": "Model"}, {"ModelName": "renamed", "Level": "Model"},
                    {"Level": "Host", "ModelName": "renamed"}]


def test_metric_objects_from_cache():
    ctx = make_context()
    metric = ctx.metrics.add_metric_to_cache("Q", "ms", ["ModelName", "Stage"], MetricTypes.GAUGE)
    assert ctx.metrics.get_metric("Q", MetricTypes.GAUGE) is metric
    metric.add_or_update(4.5, ["m", "pre"], request_id="r0")
    assert ctx.metrics.drain()[0]["dimensions"] == {"ModelName": "m", "Stage": "pre"}
    with pytest.raises(MetricsCacheValueError, match="has dimensions"):
        metric.add_or_update(1, ["only-one"])
    with pytest.raises(MetricsCacheValueError, match="can only increase"):
        ctx.metrics.add_counter("C", -1)
    with pytest.raises(MetricsCacheKeyError, match="doesn't exist"):
        ctx.metrics.get_metric("Nope")


def test_metrics_yaml_preregisters_model_metrics(tmp_path):
    cfg = tmp_path / "metrics.yaml"
    cfg.write_text("dimensions:\n  - &model_name ModelName\n  - &level Level\n"
                   "model_metrics:\n  gauge:\n    - name: HandlerTime\n      unit: ms\n"
                   "      dimensions: [*model_name, *level]\n")
    ctx = make_context(str(cfg))
    metric = ctx.metrics.get_metric("HandlerTime", MetricTypes.GAUGE)
    assert metric.unit == "Milliseconds" and metric.dimension_names == ["ModelName", "Level"]
    ctx.metrics.add_time("HandlerTime", 2.0)  # reuses the registered metric
    assert ctx.metrics.get_metric("HandlerTime", MetricTypes.GAUGE) is metric
