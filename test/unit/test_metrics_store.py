"""ts.metrics.metrics_store.MetricsStore: TorchServe's older handler metrics class, which its
MockContext test helper (copied into users' handler tests) builds as
``MetricsStore(uuid.uuid4(), model_name)``. Its calls must record as context.metrics does."""

from __future__ import annotations

import uuid

import pytest

from ts.metrics.dimension import Dimension
from ts.metrics.metrics_store import MetricsStore
from ts.metrics.outbox import take_records


def test_built_as_torchserves_mock_context_builds_it() -> None:
    request_id = uuid.uuid4()
    store = MetricsStore(request_id, "mnist")
    store.add_time("HandlerTime", 12.5)
    store.add_counter("Requests", 2, dimensions=[Dimension("Route", "predict")])
    store.add_size("Payload", 3, unit="kB")
    store.add_percent("Busy", 40)
    store.add_error("Failures", 1)
    records = take_records(store)
    assert [(r["name"], r["unit"], r["value"]) for r in records] == [
        ("HandlerTime", "Milliseconds", 12.5), ("Requests", "Count", 2), ("Payload", "Kilobytes", 3),
        ("Busy", "Percent", 40), ("Failures", "unit", 1)]
    assert records[0]["dimensions"] == {"ModelName": "mnist", "Level": "Model"}
    assert records[0]["requestId"] == str(request_id)
    assert records[1]["dimensions"] == {"Route": "predict", "ModelName": "mnist", "Level": "Model"}
    assert records[4]["dimensions"] == {"ModelName": "mnist", "Level": "Error"}
    assert take_records(store) == []


def test_per_request_ids_and_unit_checks_as_context_metrics() -> None:
    store = MetricsStore({0: "req-a", 1: "req-b"}, "m")
    store.add_metric("Tokens", 7, "count", idx=1)
    assert take_records(store)[0]["requestId"] == "req-b"
    with pytest.raises(ValueError):
        store.add_time("T", 1, unit="minutes")
