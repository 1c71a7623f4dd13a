"""Inline pipeline: the worker's main thread runs the whole handler for each batch in order."""

from __future__ import annotations

import time
from collections.abc import Callable

from ts.metrics.outbox import MetricsOutbox
from ts.pipeline.stats import PipelineStats
from ts.protocol import codec
from ts.protocol.codec import Request
from ts.service import Service

Send = Callable[..., None]  # Worker.send(*frames): written together, in order


class SyncPipeline:
    def __init__(self, service: Service, send: Send, answer: bool = True) -> None:
        self.service = service
        self.send = send
        self.answer = answer  # False on ranks > 0 of a distributed worker
        self.metrics = MetricsOutbox(service.context.metrics, send, answer)
        self.stats = PipelineStats(["handle"])
        self.completed = 0  # batches finished (answered, or dropped on ranks > 0)

    def submit(self, batch_id: int, requests: list[Request], received_at: float) -> None:
        start = time.monotonic()
        ctx = self.service.context
        ctx.stream_sender = self._chunk_sender(batch_id)
        try:
            responses = self.service.predict(requests)
        finally:
            ctx.stream_sender = None
        busy = time.monotonic() - start
        self.stats.stages["handle"].record(start - received_at, busy)
        records = self.metrics.take()
        try:
            if not self.answer:
                return
            records += self.stats.batch_records(self.service.model_name, requests,
                                                {"handle": (start - received_at, busy)})
            self.metrics.send_answer(batch_id, responses, records)
        finally:
            self.completed += 1

    def _chunk_sender(self, batch_id: int) -> Callable[[list[codec.Response]], None]:
        def send_chunk(responses: list[codec.Response]) -> None:
            if self.answer:
                self.send(codec.encode_result(batch_id, responses, chunk=True))
        return send_chunk

    def drain(self) -> None:
        """Nothing is pending: submit() returns only after the batch was answered."""

    def close(self) -> None:
        pass
