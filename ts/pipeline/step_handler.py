"""TorchServe-style continuous batching: a handler written for TorchServe 0.12 runs unmodified.

TorchServe's frontend calls the handler's ordinary ``handle(data, context)`` once per step with
a batch of the requests that are still running, each re-sent as a "cached" entry (its headers,
no inputs, so its ``data`` item is ``{}``), followed by the new requests with their inputs; at
most ``batchSize`` in all (the rest wait). The handler keeps each request's state itself
(commonly in ``context.cache`` keyed by request id) and decides per request whether it goes on:
its answer's ``ts_stream_next`` header, as ``ts.service.settle_stream_header`` sets it (TorchServe's
``context.stopping_criteria`` rule), keeps it running while present and not ``false``; every
answer but the last streams as a chunk. TorchServe's backend never clears ``context.cache``: a
request that left (its client disconnected) is simply not re-sent, and handlers drop its state
when they notice (as TorchServe's examples do).

:class:`StepHandler` gives such a handler the four hooks ``ContinuousPipeline`` drives
(``add_request``, ``step``, ``has_work``, ``cancel``); :class:`StepPipeline` feeds it whole
requests and sends what the handler streams mid-step (its metrics go out as ContinuousPipeline's do).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ts.pipeline.continuous import ContinuousPipeline
from ts.protocol import codec
from ts.protocol.codec import Request, Response
from ts.service import STREAM_HEADER, Service

logger = logging.getLogger("ts.worker")
SEQUENCE_ID = "ts_request_sequence_id"


@dataclass
class StepEvent:
    """One request's answer of a step: a ``chunk`` (it keeps running) or its ``final`` answer."""

    request_id: str
    chunk: bytes | None = None
    final: bytes | None = None
    status: int = 200
    content_type: str = ""
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def continues(response: Response) -> bool:
    """TorchServe's frontend keeps a request running while its answer's ``ts_stream_next`` is
    present and not ``false``; an error answer carries no such header, so it ends the request."""
    value = next((v for k, v in response.headers if k == STREAM_HEADER), None)
    return value is not None and value != "false"


def _unit(request: Request) -> str:
    """What batchSize counts: the request's sequence (stateful models), else the request itself."""
    for name, value in request.headers:
        if name == SEQUENCE_ID:
            return "sequence:" + value
    return "request:" + request.request_id


def cached_entry(request: Request) -> Request:
    """A running request as TorchServe re-sends it each step: its headers, no parameters."""
    return Request(request.request_id, list(request.headers), [])


def to_event(response: Response, running: bool) -> StepEvent:
    headers = dict(response.headers)
    if running:
        return StepEvent(response.request_id, chunk=response.body, status=response.status,
                         content_type=response.content_type, message=response.message, headers=headers)
    return StepEvent(response.request_id, final=response.body, status=response.status,
                     content_type=response.content_type, message=response.message, headers=headers)


class StepHandler:
    """The continuous-batching hooks for a handler that has none (TorchServe's own mode)."""

    def __init__(self, service: Service, batch_size: int) -> None:
        self.service = service
        self.batch_size = max(1, batch_size)
        self.received: dict[str, Request] = {}  # whole requests, put here by StepPipeline.submit
        self._waiting: deque[Request] = deque()  # beyond the batchSize quota, in arrival order
        self._running: dict[str, Request] = {}  # request id -> its cached entry, in admission order
        self.send_chunks: Callable[[list[Response]], None] | None = None  # mid-step streaming

    # ------------------------------------------------------------------ the hooks
    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        """Queues the request (``body``/``headers`` are in the whole request StepPipeline kept)."""
        self._waiting.append(self.received.pop(request_id))

    def has_work(self) -> bool:
        return bool(self._running or self._waiting)

    def cancel(self, request_id: str) -> None:
        """The client went away: the request is not sent to the handler again (as TorchServe's
        frontend drops it; the handler's own ``context.cache`` entry is the handler's to clear)."""
        if self._running.pop(request_id, None) is None:
            self._waiting = deque(r for r in self._waiting if r.request_id != request_id)

    def step(self) -> list[StepEvent]:
        batch = self._next_batch()
        if not batch:
            return []
        ctx = self.service.context
        ctx.stream_sender = self._send_intermediate
        try:
            responses = self.service.predict(batch, continuous=True)
        finally:
            ctx.stream_sender = None
        events = []
        for request, response in zip(batch, responses, strict=True):
            running = continues(response)
            if running:
                self._running[request.request_id] = cached_entry(request)
            else:
                self._running.pop(request.request_id, None)
            events.append(to_event(response, running))
        return events

    # ------------------------------------------------------------------ internals
    def _next_batch(self) -> list[Request]:
        """The running requests (cached entries), then new ones while the quota allows. As in
        TorchServe's SequenceContinuousBatching the quota counts sequences: a request of a sequence
        already in the batch joins it beyond batchSize (a stateful handler's "cancel" request for
        the sequence it streams, which the frontend hands over with compatibility=torchserve-0.12)."""
        batch = list(self._running.values())
        units = {_unit(r) for r in batch}
        while self._waiting and (len(units) < self.batch_size or _unit(self._waiting[0]) in units):
            request = self._waiting.popleft()
            units.add(_unit(request))
            batch.append(request)
        return batch

    def _send_intermediate(self, responses: list[Response]) -> None:
        """``send_intermediate_predict_response`` within a step: the pieces go out at once."""
        if self.send_chunks is not None:
            self.send_chunks(responses)


class StepPipeline(ContinuousPipeline):
    """``ContinuousPipeline`` over a :class:`StepHandler`: hands it whole requests, sends what the
    handler streams mid-step as CHUNKs."""

    def __init__(self, service: Service, send: Any, answer: bool, batch_size: int) -> None:
        super().__init__(service, send, answer)
        self.adapter = StepHandler(service, batch_size)
        self.adapter.send_chunks = self._send_chunks
        self.handler = self.adapter  # the hooks ContinuousPipeline calls

    def submit(self, batch_id: int, requests: list[Request], received_at: float) -> None:
        self.adapter.received.update((r.request_id, r) for r in requests)
        super().submit(batch_id, requests, received_at)

    def _send_chunks(self, responses: list[Response]) -> None:
        if not self.answer:
            return
        by_frame: dict[int, list[Response]] = {}
        for response in responses:
            frame = self._frame_of.get(response.request_id)
            if frame is not None:  # else it was cancelled: nobody is listening
                by_frame.setdefault(frame.batch_id, []).append(response)
        if by_frame:
            self.send(*(codec.encode_result(bid, pieces, chunk=True) for bid, pieces in by_frame.items()))
