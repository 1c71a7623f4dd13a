"""Metrics cache pre-populated from the metrics yaml's ``model_metrics`` section."""

from __future__ import annotations

from typing import Any

from ts.metrics.declared import model_metrics, read_config
from ts.metrics.metric_cache_abstract import MetricCacheAbstract


class MetricsCacheYamlImpl(MetricCacheAbstract):
    def __init__(self, config_file_path: str | None = None, model_name: str | None = None,
                 request_ids: Any = None) -> None:
        super().__init__(request_ids, model_name, config_file_path)
        if config_file_path:
            self.initialize_cache()

    def initialize_cache(self) -> None:
        assert self.config_file_path is not None
        for name, d in model_metrics(read_config(self.config_file_path), self.config_file_path).items():
            self.add_metric_to_cache(name, d.unit, list(d.dimensions), d.kind)
