"""Metrics cache pre-populated from the metrics yaml's ``model_metrics`` section."""

from __future__ import annotations

import logging
from typing import Any

import yaml

from ts.metrics.metric_cache_abstract import MetricCacheAbstract
from ts.metrics.metric_cache_errors import MetricsCacheTypeError
from ts.metrics.metric_type_enum import MetricTypes

logger = logging.getLogger(__name__)


class MetricsCacheYamlImpl(MetricCacheAbstract):
    def __init__(self, config_file_path: str | None = None, model_name: str | None = None,
                 request_ids: Any = None) -> None:
        super().__init__(request_ids, model_name, config_file_path)
        if config_file_path:
            self.initialize_cache()

    def initialize_cache(self) -> None:
        try:
            with open(self.config_file_path, encoding="utf-8") as f:  # type: ignore[arg-type]
                config = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise MetricsCacheTypeError(f"cannot read metrics config {self.config_file_path}: {exc}") from None
        sections = config.get("model_metrics") or {}
        if not isinstance(sections, dict):
            raise MetricsCacheTypeError(f"model_metrics in {self.config_file_path} must be a mapping")
        for type_name, entries in sections.items():
            try:
                mtype = MetricTypes(type_name)
            except ValueError:
                logger.warning("metrics config: ignoring unknown metric type %s", type_name)
                continue
            for entry in entries or []:
                if not isinstance(entry, dict) or "name" not in entry:
                    logger.warning("metrics config: ignoring malformed entry %r", entry)
                    continue
                self.add_metric_to_cache(entry["name"], entry.get("unit", ""),
                                         list(entry.get("dimensions") or []), mtype)
