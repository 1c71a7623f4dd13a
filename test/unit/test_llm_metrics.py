"""LLMMetrics (ts/llm/handler/llm_metrics.py) through the worker's real metrics cache: the token counters'
increments are summed and recorded with the gauges (every GAUGE_INTERVAL_S, or when forced as the
engine goes idle), one record each, not one per request per step; per-request latencies stay
one record per request."""

from __future__ import annotations

from ts.llm.handler import llm_metrics
from ts.llm.handler.llm_metrics import LLMMetrics
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl
from ts.metrics.outbox import take_records


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_token_counters_are_summed_and_recorded_with_the_gauges():
    cache = MetricsCacheYamlImpl(None)
    clock = Clock()
    m = LLMMetrics(cache, "tiny", clock)
    m.gauges(0, 0, 0.0, force=True)
    take_records(cache)
    for rid in ("a", "b", "c"):
        m.arrived(rid, 10)
    for _ in range(5):  # five steps, each a token for every request, within one interval
        clock.now += 0.01
        for rid in ("a", "b", "c"):
            m.tokens(rid, 1)
        m.gauges(3, 0, 0.5)
    records = take_records(cache)
    names = [r["name"] for r in records]
    assert names.count(llm_metrics.TTFT) == 3  # one per request
    assert llm_metrics.GENERATION_TOKENS not in names and llm_metrics.PROMPT_TOKENS not in names
    clock.now += llm_metrics.GAUGE_INTERVAL_S
    m.tokens("a", 2)
    m.gauges(3, 0, 0.5)
    counters = {r["name"]: r["value"] for r in take_records(cache) if r["name"].endswith("tokens_total")}
    assert counters == {llm_metrics.PROMPT_TOKENS: 30, llm_metrics.GENERATION_TOKENS: 17}
    m.tokens("b", 4)
    m.gauges(1, 0, 0.1, force=True)  # the engine went idle: what is left goes out now
    counters = {r["name"]: r["value"] for r in take_records(cache) if r["name"].endswith("tokens_total")}
    assert counters == {llm_metrics.GENERATION_TOKENS: 4}
