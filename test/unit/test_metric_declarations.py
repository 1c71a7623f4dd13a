"""Metric declarations live in ts/configs/metrics.yaml only: the LLM metrics take their type, unit and
labels from it (ts/metrics/declared.py), and the worker's cache reads user files the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from ts.llm.handler import llm_metrics
from ts.llm.handler.llm_metrics import LLMMetrics
from ts.metrics.declared import SHIPPED_CONFIG, MetricDeclaration, declared, model_metrics, read_config
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl
from ts.metrics.metric_type_enum import MetricTypes
from ts.metrics.unit import normalise_unit


def test_the_llm_metrics_are_registered_as_metrics_yaml_declares_them() -> None:
    shipped = model_metrics(read_config(SHIPPED_CONFIG), "shipped")
    cache = MetricsCacheYamlImpl(None)
    LLMMetrics(cache, "tiny")
    for name in llm_metrics.NAMES:
        metric = cache.get_metric(name, shipped[name].kind)
        assert (metric.unit, metric.metric_type, tuple(metric.dimension_names)) == (
            normalise_unit(shipped[name].unit), shipped[name].kind, shipped[name].dimensions), name
    assert shipped[llm_metrics.TTFT].kind is MetricTypes.HISTOGRAM and shipped[llm_metrics.TTFT].unit == "Seconds"
    assert shipped[llm_metrics.FINISHED].dimensions == ("model_name", "finish_reason")


def test_a_metric_missing_from_the_yaml_is_named() -> None:
    with pytest.raises(KeyError, match=r"\['llm_not_declared'\] are not declared in .*metrics.yaml"):
        declared(["llm_time_to_first_token_seconds", "llm_not_declared"])


def test_a_user_file_skips_unknown_types_and_malformed_entries(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("model_metrics:\n  counter:\n    - name: a\n      unit: Count\n    - 3\n  timer:\n    - name: b\n")
    assert model_metrics(read_config(path), str(path)) == {"a": MetricDeclaration(MetricTypes.COUNTER, "Count", ())}
