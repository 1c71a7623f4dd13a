"""The one path from a handler's ``context.metrics`` to the frontend: METRICS frames.

Every worker loop in ts/pipeline/ (sync, pooled and its pool processes, continuous, step_handler)
takes the handler's records and sends them through here, so a metric declared in metrics.yaml
reaches /metrics whichever pipeline runs the model (docs/metrics.md, docs/protocol.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ts.protocol import codec
from ts.protocol.codec import FrameType, Response

Record = dict[str, Any]

# Continuous batching: a step takes a few ms, and each METRICS frame costs the frontend a JSON parse
# and a log line per record, so a frame per step would cost more than it tells. The records go out
# when a request ends (beside its answer) and, while long requests run, at least this often, so
# the handler's cache never grows without bound and /metrics lags by at most this much.
CONTINUOUS_FLUSH_INTERVAL_S = 1.0


def take_records(cache: Any) -> list[Record]:
    """Everything the handler recorded since the last take; [] for a model without metrics.
    A pool process calls this alone: its records travel to the worker with the batch."""
    return cache.drain() if cache is not None else []


class MetricsOutbox:
    """The handler's metrics cache and the worker's socket: takes the records, sends METRICS frames."""

    def __init__(self, cache: Any, send: Callable[..., None], answer: bool = True,
                 interval_s: float = CONTINUOUS_FLUSH_INTERVAL_S) -> None:
        self.cache = cache  # the handler's MetricCacheAbstract (context.metrics), or None
        self.send = send  # Worker.send(*frames): written together, in order
        self.answer = answer  # False on ranks > 0 of a distributed worker: records are dropped
        self.interval_s = interval_s
        self._last_flush = time.monotonic()

    def take(self) -> list[Record]:
        """Take the records now (every rank does, so none piles up where nothing is sent)."""
        return take_records(self.cache)

    def send_answer(self, batch_id: int, responses: list[Response], records: list[Record]) -> None:
        """A batch's METRICS frame when there are records, then its RESULT, in one write."""
        if self.answer:
            self.send(*codec.encode_answer(batch_id, responses, records))

    def flush(self, out: list[bytes] | None = None) -> None:
        """What the handler recorded as one METRICS frame: appended to ``out`` (the caller writes
        it with the frames there), else sent at once."""
        self._last_flush = time.monotonic()
        records = self.take()
        if not records or not self.answer:
            return
        # batch id 0: continuous batching's records span several INFERENCE frames, and the
        # frontend reads a METRICS frame without its batch id
        frame = codec.encode_json_frame(FrameType.METRICS, 0, records)
        if out is None:
            self.send(frame)
        else:
            out.append(frame)

    def tick(self, ended: bool, out: list[bytes] | None = None) -> None:
        """Continuous batching's cadence (see CONTINUOUS_FLUSH_INTERVAL_S): flush when a request
        ended, or when the interval passed since the last flush."""
        if ended or time.monotonic() - self._last_flush >= self.interval_s:
            self.flush(out)
