"""Continuous batching: requests join the handler's running batch between two of its steps.

The handler keeps the running sequences (e.g. ``ts.llm``'s engine); this pipeline only moves
requests in and answers out. Each INFERENCE frame's requests go to ``handler.add_request`` as the
frame arrives; the worker's loop calls ``step()`` while the handler has work, and every event a
step yields becomes a CHUNK (a streamed piece) or ends its request. A frame's RESULT goes out
once all of its requests have ended, so the frontend's batch accounting stays exactly as for
ordinary batches (one RESULT per INFERENCE frame).
"""

from __future__ import annotations

import json
import logging
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ts.metrics.outbox import MetricsOutbox
from ts.pipeline.stats import PipelineStats
from ts.protocol import codec
from ts.protocol.codec import Request, Response

logger = logging.getLogger("ts.worker")

Send = Callable[..., None]
HOOKS = ("add_request", "step", "has_work", "cancel")
CANCELLED = 499
DRAIN_WAIT_S = 0.05


def missing_hooks(handler: Any) -> list[str]:
    """The continuous-batching hooks a handler lacks (all of them for a function handler)."""
    return [h for h in HOOKS if not callable(getattr(handler, h, None))]


@dataclass
class _Frame:
    """An INFERENCE frame whose requests are still running."""

    batch_id: int
    order: list[str]
    answers: dict[str, Response] = field(default_factory=dict)
    received_at: float = 0.0


class ContinuousPipeline:
    def __init__(self, service: Any, send: Send, answer: bool = True) -> None:
        self.service = service
        self.handler = service.handler
        self.send = send
        self.answer = answer
        # a handler's own parts of a step (STEP_STAGES, timed by its step_stages()), e.g. the LLM
        # handler's decode and prefill, are stages of their own in PONG
        self._parts = tuple(getattr(self.handler, "STEP_STAGES", ()))
        self.stats = PipelineStats(["step", *self._parts])
        self.metrics = MetricsOutbox(service.context.metrics, send, answer)
        self.completed = 0  # INFERENCE frames fully answered
        self._frames: dict[int, _Frame] = {}
        self._frame_of: dict[str, _Frame] = {}  # request id -> its frame

    # ------------------------------------------------------------------ requests in
    def submit(self, batch_id: int, requests: list[Request], received_at: float) -> None:
        frame = _Frame(batch_id, [r.request_id for r in requests], received_at=received_at)
        self._frames[batch_id] = frame
        for r in requests:
            self._frame_of[r.request_id] = frame
            body = r.parts[0].value if r.parts else b""
            headers = {k.lower(): v for k, v in r.headers}
            try:
                self.handler.add_request(r.request_id, bytes(body), headers)
            except Exception as exc:  # noqa: BLE001 - a refused request is answered, the rest go on
                self._end(r.request_id, _error_response(r.request_id, exc))
        self._flush(frame)
        self.metrics.tick(ended=batch_id not in self._frames)  # e.g. every request refused

    def cancel(self, batch_id: int, request_id: str) -> None:
        frame = self._frame_of.get(request_id)
        if frame is None or frame.batch_id != batch_id:
            return  # answered already: nothing to free
        self.handler.cancel(request_id)
        # The handler ends the sequence at its next step; answer now so the slot counts as free
        # on the frontend even if the handler reports nothing more for it.
        self._end(request_id, Response(request_id, CANCELLED, "cancelled by the client"))
        self._flush(frame)

    def has_work(self) -> bool:
        return bool(self.handler.has_work())

    def step_fileno(self) -> int | None:
        """A file descriptor that is readable when the handler's next step has something (an
        LLM engine process's pipe), for the worker to wait on; None: step whenever idle."""
        fileno = getattr(self.handler, "step_fileno", None)
        return fileno() if callable(fileno) else None

    # ------------------------------------------------------------------ answers out
    def step(self) -> None:
        start = time.monotonic()
        events = self.handler.step()
        self.stats.stages["step"].record(0.0, time.monotonic() - start)
        self._record_stages()
        chunks: dict[int, list[Response]] = {}
        touched: dict[int, _Frame] = {}
        for ev in events:
            frame = self._frame_of.get(ev.request_id)
            if frame is None:
                continue  # cancelled: already answered
            if ev.chunk is not None and self.answer:
                # a chunk keeps its event's status and headers (TorchServe-style handlers set them
                # on every streamed piece, e.g. the sequence id)
                extra = [(k, v) for k, v in (getattr(ev, "headers", None) or {}).items() if k != "ts_stream_next"]
                chunks.setdefault(frame.batch_id, []).append(Response(
                    ev.request_id, int(getattr(ev, "status", 200) or 200), getattr(ev, "message", "") or "",
                    ev.content_type, [("ts_stream_next", "true"), *extra], bytes(ev.chunk)))
            if ev.final is not None:
                status = int(getattr(ev, "status", 200) or 200)
                headers = list((getattr(ev, "headers", None) or {}).items())  # e.g. Retry-After on a 503
                self._end(ev.request_id, Response(ev.request_id, status, getattr(ev, "message", "") or "",
                                                  ev.content_type, headers, bytes(ev.final)))
                touched[frame.batch_id] = frame
        # every frame of the step in one write (one syscall while they are small): chunks, the
        # metrics, then the RESULTs that end requests (their metrics are recorded before they are answered)
        out = [codec.encode_result(batch_id, pieces, chunk=True) for batch_id, pieces in chunks.items()]
        results: list[bytes] = []
        for frame in touched.values():
            self._flush(frame, results)
        self.metrics.tick(ended=bool(touched), out=out)
        out += results
        if out and self.answer:
            self.send(*out)

    def _record_stages(self) -> None:
        if not self._parts:
            return
        for name, busy_s in self.handler.step_stages().items():
            if busy_s > 0 and name in self._parts:
                self.stats.stages[name].record(0.0, busy_s)

    def drain(self) -> None:
        """Runs the handler until every request it holds has ended (STOP: finish what was sent)."""
        fileno = self.step_fileno()
        while self._frames and self.has_work():
            if fileno is not None:  # the handler's step does not wait on it: wait here, not spin
                select.select([fileno], [], [], DRAIN_WAIT_S)
            self.step()

    def close(self) -> None:
        close = getattr(self.handler, "close", None)
        if callable(close):  # e.g. release other ranks that follow rank 0's steps
            close()

    # ------------------------------------------------------------------ bookkeeping
    def _end(self, request_id: str, response: Response) -> None:
        frame = self._frame_of.pop(request_id, None)
        if frame is not None:
            frame.answers[request_id] = response

    def _flush(self, frame: _Frame, out: list[bytes] | None = None) -> None:
        """Answers a frame whose requests have all ended: its RESULT goes into ``out`` (sent by
        the caller), or out at once."""
        if len(frame.answers) < len(frame.order) or frame.batch_id not in self._frames:
            return
        del self._frames[frame.batch_id]
        self.completed += 1
        if self.answer:
            result = codec.encode_result(frame.batch_id, [frame.answers[i] for i in frame.order])
            if out is None:
                self.send(result)
            else:
                out.append(result)


def _error_response(request_id: str, exc: Exception) -> Response:
    """A refused request: the handler's status and body when it gives them, else 500 naming the error."""
    status = getattr(exc, "status", None)
    if not isinstance(status, int) or not 400 <= status <= 599:
        logger.exception("add_request failed for request %s", request_id)
        return Response(request_id, 500, f"{type(exc).__name__}: {exc}")
    body = getattr(exc, "body", None)
    if callable(body):
        body = body()
    if not isinstance(body, (bytes, bytearray)):
        body = json.dumps({"code": status, "type": type(exc).__name__, "message": str(exc)}).encode()
    # a full queue is worth retrying: say when (TorchServe clients honour Retry-After)
    headers = [("Retry-After", "1")] if status in (429, 503) else []
    return Response(request_id, status, str(exc), "application/json", headers, bytes(body))
