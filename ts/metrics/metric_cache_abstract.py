"""TorchServe's handler metrics API (context.metrics)."""

from __future__ import annotations

import threading
from typing import Any

from ts.metrics.dimension import Dimension
from ts.metrics.metric import Metric
from ts.metrics.metric_cache_errors import MetricsCacheKeyError, MetricsCacheTypeError
from ts.metrics.metric_type_enum import MetricTypes


class MetricCacheAbstract:
    """Registers metrics and collects every update until the worker drains them."""

    def __init__(self, request_ids: Any = None, model_name: str | None = None,
                 config_file_path: str | None = None) -> None:
        self.request_ids = request_ids
        self.model_name = model_name
        self.config_file_path = config_file_path
        self.cache: dict[tuple[str, str], Metric] = {}
        self._records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._default_dims: tuple[str | None, list[str], list[str]] | None = None

    # --------------------------------------------------------------- record sink
    def _emit(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._records.append(record)

    def drain(self) -> list[dict[str, Any]]:
        """Every record since the last drain (the worker sends them as one METRICS frame)."""
        with self._lock:
            records, self._records = self._records, []
        return records

    # --------------------------------------------------------------- registration
    def add_metric_to_cache(self, metric_name: str, unit: str, dimension_names: list[str] | None = None,
                            metric_type: MetricTypes = MetricTypes.COUNTER) -> Metric:
        if not isinstance(metric_name, str) or not metric_name:
            raise MetricsCacheTypeError(f"metric name must be a non-empty str, got {metric_name!r}")
        mtype = MetricTypes(metric_type)
        key = (mtype.value, metric_name)
        names = list(dimension_names or [])
        existing = self.cache.get(key)
        if existing is not None and existing.dimension_names == names:
            return existing
        metric = Metric(metric_name, unit, names, mtype, self._emit)
        self.cache[key] = metric
        return metric

    def get_metric(self, metric_name: str, metric_type: MetricTypes = MetricTypes.COUNTER) -> Metric:
        key = (MetricTypes(metric_type).value, metric_name)
        if key not in self.cache:
            raise MetricsCacheKeyError(
                f"Metric of type {key[0]} and name {metric_name} doesn't exist in the cache; "
                "register it with add_metric_to_cache or in the metrics config's model_metrics")
        return self.cache[key]

    # --------------------------------------------------------------- helpers
    def _get_req(self, idx: int | None) -> str:
        req = self.request_ids
        if isinstance(req, dict):
            if idx is not None and idx in req:
                return str(req[idx])
            return ",".join(str(v) for v in req.values())
        return "" if req is None else str(req)

    def _model_dims(self) -> tuple[list[str], list[str]]:
        """Names and values of ``_with_default_dims(None)``, made again only if the model's name changes."""
        if self._default_dims is None or self._default_dims[0] != self.model_name:
            dims = self._with_default_dims(None)
            self._default_dims = (self.model_name, [d.name for d in dims], [d.value for d in dims])
        return self._default_dims[1], self._default_dims[2]

    def _with_default_dims(self, dimensions: list[Dimension] | None, level: str = "Model") -> list[Dimension]:
        dims = list(dimensions or [])
        names = {d.name for d in dims}
        if "ModelName" not in names and self.model_name is not None:
            dims.append(Dimension("ModelName", self.model_name))
        if "Level" not in names:
            dims.append(Dimension("Level", level))
        return dims

    # --------------------------------------------------------------- TorchServe API
    def add_metric(self, name: str, value: int | float, unit: str, idx: int | None = None,
                   dimensions: list[Dimension] | None = None,
                   metric_type: MetricTypes = MetricTypes.COUNTER) -> None:
        if dimensions is None:  # the common call (PredictionTime on every batch): names and values kept
            names, values = self._model_dims()
        else:
            dims = self._with_default_dims(dimensions)
            names, values = [d.name for d in dims], [d.value for d in dims]
        metric = self.add_metric_to_cache(name, unit, names, metric_type)
        metric.add_or_update(value, values, self._get_req(idx))

    def add_counter(self, name: str, value: int | float, idx: int | None = None,
                    dimensions: list[Dimension] | None = None) -> None:
        self.add_metric(name, value, "count", idx, dimensions, MetricTypes.COUNTER)

    def add_time(self, name: str, value: int | float, idx: int | None = None, unit: str = "ms",
                 dimensions: list[Dimension] | None = None,
                 metric_type: MetricTypes = MetricTypes.GAUGE) -> None:
        if unit not in ("ms", "s", "us", "ns"):
            raise ValueError(f"the unit for a timed metric should be one of ms, s, us, ns, got {unit}")
        self.add_metric(name, value, {"us": "Microseconds", "ns": "Nanoseconds"}.get(unit, unit),
                        idx, dimensions, metric_type)

    def add_size(self, name: str, value: int | float, idx: int | None = None, unit: str = "MB",
                 dimensions: list[Dimension] | None = None,
                 metric_type: MetricTypes = MetricTypes.GAUGE) -> None:
        if unit not in ("MB", "kB", "GB", "B"):
            raise ValueError(f"the unit for a size metric should be one of MB, kB, GB, B, got {unit}")
        self.add_metric(name, value, unit, idx, dimensions, metric_type)

    def add_percent(self, name: str, value: int | float, idx: int | None = None,
                    dimensions: list[Dimension] | None = None,
                    metric_type: MetricTypes = MetricTypes.GAUGE) -> None:
        self.add_metric(name, value, "percent", idx, dimensions, metric_type)

    def add_error(self, name: str, value: int | float, dimensions: list[Dimension] | None = None) -> None:
        dims = self._with_default_dims(dimensions, level="Error")
        metric = self.add_metric_to_cache(name, "", [d.name for d in dims], MetricTypes.COUNTER)
        metric.add_or_update(value, [d.value for d in dims], self._get_req(None))
