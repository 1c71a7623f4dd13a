"""Model metric declarations (type, unit, dimensions) as a metrics yaml's ``model_metrics`` holds them.

The shipped ts/configs/metrics.yaml is the one place the metrics tserve's own code records are
declared (the frontend reads the same file to build /metrics): ``declared`` gives that code their
declarations, so a type or unit is never written twice.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ts.metrics.metric_cache_errors import MetricsCacheTypeError
from ts.metrics.metric_type_enum import MetricTypes

logger = logging.getLogger(__name__)

SHIPPED_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "metrics.yaml"


@dataclass(frozen=True)
class MetricDeclaration:
    kind: MetricTypes
    unit: str
    dimensions: tuple[str, ...]


def read_config(path: str | Path) -> dict[str, Any]:
    """The metrics yaml at ``path`` (MetricsCacheTypeError naming it when it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise MetricsCacheTypeError(f"cannot read metrics config {path}: {exc}") from None
    if not isinstance(config, dict):
        raise MetricsCacheTypeError(f"metrics config {path} must be a mapping")
    return config


def model_metrics(config: Mapping[str, Any], source: str) -> dict[str, MetricDeclaration]:
    """``config``'s ``model_metrics`` by name; unknown types and malformed entries are logged and skipped."""
    sections = config.get("model_metrics") or {}
    if not isinstance(sections, dict):
        raise MetricsCacheTypeError(f"model_metrics in {source} must be a mapping")
    out: dict[str, MetricDeclaration] = {}
    for type_name, entries in sections.items():
        try:
            kind = MetricTypes(type_name)
        except ValueError:
            logger.warning("metrics config: ignoring unknown metric type %s", type_name)
            continue
        for entry in entries or []:
            if not isinstance(entry, dict) or "name" not in entry:
                logger.warning("metrics config: ignoring malformed entry %r", entry)
                continue
            out[entry["name"]] = MetricDeclaration(kind, str(entry.get("unit", "")),
                                                   tuple(entry.get("dimensions") or ()))
    return out


@functools.cache
def _shipped() -> dict[str, MetricDeclaration]:
    return model_metrics(read_config(SHIPPED_CONFIG), str(SHIPPED_CONFIG))


def declared(names: Iterable[str]) -> dict[str, MetricDeclaration]:
    """The shipped declarations of ``names``; a name it lacks is a programming error, named here."""
    shipped = _shipped()
    missing = [n for n in names if n not in shipped]
    if missing:
        raise KeyError(f"metrics {missing} are not declared in {SHIPPED_CONFIG} (model_metrics): declare them there")
    return {n: shipped[n] for n in names}
