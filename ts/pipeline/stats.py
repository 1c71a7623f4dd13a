"""Per-stage busy time and queue wait, reported in PONG (``stages``) and METRICS frames."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from ts.protocol.codec import Request

# Stage gauges are sampled: the first batch's, then one batch's per interval. Per batch they cost
# the frontend a JSON parse and a log line each for every request at batch 1, for a value a
# scrape (every 15 s or more) would only see the last of; the cumulative counters travel in PONG.
STAGE_METRICS_INTERVAL_ENV = "TS_STAGE_METRICS_INTERVAL_S"
DEFAULT_STAGE_METRICS_INTERVAL_S = 1.0


def stage_metrics_interval() -> float:
    raw = os.environ.get(STAGE_METRICS_INTERVAL_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_STAGE_METRICS_INTERVAL_S
    except ValueError:
        raise SystemExit(f"{STAGE_METRICS_INTERVAL_ENV}={raw!r} is not a number of seconds") from None


class StageStats:
    """Cumulative counters for one pipeline stage."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.batches = 0
        self.busy_ms = 0.0
        self.queue_wait_ms = 0.0
        self._lock = threading.Lock()

    def record(self, queue_wait_s: float, busy_s: float) -> None:
        with self._lock:
            self.batches += 1
            self.busy_ms += busy_s * 1000.0
            self.queue_wait_ms += max(0.0, queue_wait_s) * 1000.0

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"batches": self.batches, "busyMs": round(self.busy_ms, 3),
                    "queueWaitMs": round(self.queue_wait_ms, 3)}


class IdleTracker:
    """Time the inference stage waited for input while batches were inside the worker.

    ``idleFraction`` = starved / (starved + busy): 0 means inference never waited on
    preprocessing (the pool keeps it fed); near 1 means it mostly waited.
    """

    def __init__(self) -> None:
        self.starved_s = 0.0
        self.busy_s = 0.0
        self._lock = threading.Lock()

    def add(self, starved_s: float, busy_s: float) -> None:
        with self._lock:
            self.starved_s += max(0.0, starved_s)
            self.busy_s += max(0.0, busy_s)

    def fraction(self) -> float:
        with self._lock:
            total = self.starved_s + self.busy_s
            return round(self.starved_s / total, 6) if total > 0 else 0.0


class PipelineStats:
    def __init__(self, stage_names: list[str]) -> None:
        self.stages = {n: StageStats(n) for n in stage_names}
        self.idle = IdleTracker()
        self.started = time.monotonic()
        self.worker_name = ""  # LOAD's workerName (W-<port>-<model>_<version>): the per-worker dimension
        self._sample_every_s = stage_metrics_interval()
        self._sampled_at = float("-inf")

    def snapshot(self) -> dict[str, Any]:
        out = {n: s.snapshot() for n, s in self.stages.items()}
        if "inference" in out:
            out["inference"]["idleFraction"] = self.idle.fraction()
        return out

    def batch_records(self, model_name: str, requests: Sequence[Request],
                      per_stage: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
        """METRICS records for one batch: each stage's busy and queue-wait time (seconds); empty
        unless the batch is due for a sample (TS_STAGE_METRICS_INTERVAL_S). tserve's own metrics,
        named by Prometheus' conventions (ts/configs/metrics.yaml)."""
        now = time.monotonic()
        if now - self._sampled_at < self._sample_every_s:
            return []
        self._sampled_at = now
        request_ids = ",".join(r.request_id for r in requests)
        records: list[dict[str, Any]] = []
        base = {"model_name": model_name}
        if self.worker_name:
            base["worker_name"] = self.worker_name
        for stage, (wait_s, busy_s) in per_stage.items():
            dims = {**base, "stage": stage}
            records.append({"name": "ts_stage_busy_seconds", "unit": "Seconds",
                            "value": round(busy_s, 6), "type": "gauge",
                            "dimensions": dims, "requestId": request_ids})
            records.append({"name": "ts_stage_queue_wait_seconds", "unit": "Seconds",
                            "value": round(wait_s, 6), "type": "gauge",
                            "dimensions": dict(dims), "requestId": request_ids})
        if "inference" in per_stage:
            records.append({"name": "ts_inference_idle_ratio", "unit": "Ratio",
                            "value": self.idle.fraction(), "type": "gauge",
                            "dimensions": dict(base),
                            "requestId": request_ids})
        return records
