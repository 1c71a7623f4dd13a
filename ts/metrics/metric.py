"""One registered metric; each update becomes a record flushed in the batch's METRICS frame."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ts.metrics.dimension import Dimension
from ts.metrics.metric_cache_errors import MetricsCacheValueError
from ts.metrics.metric_type_enum import MetricTypes
from ts.metrics.unit import normalise_unit

RecordSink = Callable[[dict[str, Any]], None]


class Metric:
    def __init__(self, metric_name: str, unit: str, dimension_names: list[str],
                 metric_type: MetricTypes, sink: RecordSink) -> None:
        self.metric_name = metric_name
        self.unit = normalise_unit(unit)
        self.dimension_names = list(dimension_names)
        self.metric_type = MetricTypes(metric_type)
        self._sink = sink
        self._lock = threading.Lock()

    def add_or_update(self, value: int | float, dimension_values: list[str] | None = None,
                      request_id: str = "") -> None:
        values = list(dimension_values or [])
        if len(values) != len(self.dimension_names):
            raise MetricsCacheValueError(
                f"metric {self.metric_name} has dimensions {self.dimension_names} but got "
                f"{len(values)} values {values}")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise MetricsCacheValueError(
                f"metric {self.metric_name}: value must be a number, got {type(value).__name__}")
        if self.metric_type is MetricTypes.COUNTER and value < 0:
            raise MetricsCacheValueError(
                f"counter {self.metric_name} can only increase, got {value}")
        self._sink({
            "name": self.metric_name,
            "unit": self.unit,
            "value": value,
            "type": self.metric_type.value,
            "dimensions": {n: str(v) for n, v in zip(self.dimension_names, values, strict=True)},
            "requestId": request_id or "",
        })

    def update(self, value: int | float, request_id: str = "",
               dimensions: list[Dimension] | None = None) -> None:
        """TorchServe's older spelling: update with Dimension objects."""
        dims = {d.name: d.value for d in dimensions or []}
        self.add_or_update(value, [dims.get(n, "") for n in self.dimension_names], request_id)

    def __repr__(self) -> str:
        return f"Metric({self.metric_name}, {self.unit}, {self.dimension_names}, {self.metric_type.value})"
