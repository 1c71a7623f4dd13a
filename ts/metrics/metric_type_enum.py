"""Metric types as in TorchServe."""

import enum


class MetricTypes(enum.StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
