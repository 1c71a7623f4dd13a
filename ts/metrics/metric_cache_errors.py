"""Errors raised by the metrics cache (TorchServe names)."""


class GeneralMetricsCacheError(Exception):
    pass


class MetricsCacheTypeError(GeneralMetricsCacheError, TypeError):
    pass


class MetricsCacheKeyError(GeneralMetricsCacheError, KeyError):
    pass


class MetricsCacheValueError(GeneralMetricsCacheError, ValueError):
    pass
