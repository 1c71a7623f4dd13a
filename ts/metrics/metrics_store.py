"""TorchServe's older handler metrics class, still imported by handler code and by the
`MockContext` helper that TorchServe's and its users' handler tests copy:
``context.metrics = MetricsStore(request_ids, model_name)``.

The same calls as ``context.metrics`` (add_counter, add_time, add_size, add_percent, add_error,
add_metric); the updates are records the worker drains, as for the cache a worker builds from the
metrics yaml. TorchServe's internal ``store`` list and ``cache`` key strings are not kept.
"""

from __future__ import annotations

from typing import Any

from ts.metrics.metric_cache_abstract import MetricCacheAbstract


class MetricsStore(MetricCacheAbstract):
    def __init__(self, request_ids: Any, model_name: str | None) -> None:
        super().__init__(request_ids, model_name)
