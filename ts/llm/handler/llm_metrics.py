"""The LLM handler's serving metrics, recorded through ``context.metrics`` (so they reach
``/metrics`` the way every handler metric does: ts/metrics/outbox.py), per model.

Declared in ts/configs/metrics.yaml (``model_metrics``) with Prometheus names: a unit suffix,
counters ending in ``_total``. Every value is one record the worker sends to the frontend, so
what is recorded per token is kept out: latencies are recorded once per request (time to first
token, end to end, and the mean time between its output tokens); the running / waiting /
KV-cache gauges, and the token counters' increments summed since the last time, at most every
``GAUGE_INTERVAL_S`` and when the engine goes idle (a counter record per request per step was
32 records a step at batch 32: recording and encoding them took about a tenth of the worker's
Python time at c32, and the frontend parsed and logged each).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ts.metrics.declared import declared

GAUGE_INTERVAL_S = 0.5

TTFT = "llm_time_to_first_token_seconds"
INTER_TOKEN = "llm_inter_token_latency_seconds"
E2E = "llm_e2e_request_latency_seconds"
PROMPT_TOKENS = "llm_prompt_tokens_total"
GENERATION_TOKENS = "llm_generation_tokens_total"
FINISHED = "llm_requests_finished_total"
RUNNING = "llm_num_requests_running"
WAITING = "llm_num_requests_waiting"
KV_USAGE = "llm_kv_cache_usage_ratio"
PREFIX_HITS = "llm_prefix_cache_hit_ratio"

NAMES = (TTFT, INTER_TOKEN, E2E, PROMPT_TOKENS, GENERATION_TOKENS, FINISHED, RUNNING, WAITING, KV_USAGE, PREFIX_HITS)
MODEL_LABEL = "model_name"


@dataclass
class _Timing:
    arrived: float
    prompt_tokens: int  # counted when the first token shows the engine took the prompt
    first: float | None = None
    steps: int = 0  # steps that gave it tokens (one per step, whatever its n)


class LLMMetrics:
    """Records one model's LLM metrics into the handler's metrics cache (``None``: off)."""

    def __init__(self, cache: Any, model_name: str, clock: Any = time.monotonic) -> None:
        self.model_name = model_name
        self.clock = clock
        self._timings: dict[str, _Timing] = {}
        self._last_gauges = float("-inf")
        self._counted = {PROMPT_TOKENS: 0, GENERATION_TOKENS: 0}  # not recorded yet
        self._metrics: dict[str, Any] = {}
        if cache is not None:
            for name, d in declared(NAMES).items():  # type, unit and labels: ts/configs/metrics.yaml
                self._metrics[name] = cache.add_metric_to_cache(name, d.unit, list(d.dimensions), d.kind)

    def _record(self, name: str, value: float, *extra: str) -> None:
        metric = self._metrics.get(name)
        if metric is not None:
            metric.add_or_update(value, [self.model_name, *extra])

    def arrived(self, request_id: str, prompt_tokens: int) -> None:
        """A request was queued; its prompt tokens count once it gives tokens (a prompt the engine
        refuses, perhaps a step later, never counts)."""
        self._timings[request_id] = _Timing(self.clock(), prompt_tokens)

    def pending(self, name: str) -> int:
        """A counter's increment not recorded yet (``gauges`` records it)."""
        return self._counted[name]

    def tokens(self, request_id: str, count: int) -> None:
        """A step gave a request ``count`` new tokens (all its sequences; the first: its TTFT)."""
        timing = self._timings.get(request_id)
        if timing is None or count <= 0:
            return
        if timing.first is None:
            timing.first = self.clock()
            self._record(TTFT, timing.first - timing.arrived)
            self._counted[PROMPT_TOKENS] += timing.prompt_tokens
        timing.steps += 1
        self._counted[GENERATION_TOKENS] += count

    def finished(self, request_id: str, finish_reason: str) -> None:
        """The request is over (answered, cancelled or failed): its latencies and finish reason."""
        timing = self._timings.pop(request_id, None)
        if timing is None:
            return
        now = self.clock()
        self._record(E2E, now - timing.arrived)
        if timing.first is not None and timing.steps > 1:
            self._record(INTER_TOKEN, (now - timing.first) / (timing.steps - 1))
        self._record(FINISHED, 1, finish_reason)

    def gauges(self, running: int, waiting: int, kv_usage: float, force: bool = False) -> None:
        """The gauges and the counters' increments, if ``GAUGE_INTERVAL_S`` has passed (or ``force``)."""
        now = self.clock()
        if not force and now - self._last_gauges < GAUGE_INTERVAL_S:
            return
        self._last_gauges = now
        for name, count in self._counted.items():
            if count:
                self._record(name, count)
                self._counted[name] = 0
        self._record(RUNNING, running)
        self._record(WAITING, waiting)
        self._record(KV_USAGE, kv_usage)

    def prefix_cache(self, hit_ratio: float) -> None:
        """The paged KV cache's prefix hit ratio since the worker started (prompt tokens found of those looked up)."""
        self._record(PREFIX_HITS, hit_ratio)
