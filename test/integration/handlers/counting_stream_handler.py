"""A continuous-batching handler with no model: each sequence counts to ``n``, one token a step.

It has the hooks of docs/llm.md (add_request, step, has_work, cancel) and records, per sequence,
how many steps it shared with other sequences, so tests can see requests join a running batch.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from ts.llm.api.request import LLMEvent
from ts.llm.params import LLMRequestError


@dataclass
class Sequence:
    request_id: str
    n: int
    done: int = 0
    shared_steps: int = 0
    cancelled: bool = False


class CountingStreamHandler:
    def initialize(self, context) -> None:
        self.capacity = context.system_properties.get("batch_size", 1)
        self.step_s = 0.0
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []

    def handle(self, data, context):  # the plain path is unused with continuousBatching
        raise RuntimeError("called without continuousBatching")

    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            raise LLMRequestError(400, "body must be JSON like {\"n\": 5}") from None
        n = req.get("n")
        if not isinstance(n, int) or n < 1:
            raise LLMRequestError(400, f"'n' must be a positive integer, got {n!r}")
        self.step_s = float(req.get("step_ms", 0)) / 1000
        self.waiting.append(Sequence(request_id, n))

    def cancel(self, request_id: str) -> None:
        for seq in self.waiting + self.running:
            if seq.request_id == request_id:
                seq.cancelled = True

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def step(self) -> list[LLMEvent]:
        events: list[LLMEvent] = []
        for seq in [s for s in self.waiting + self.running if s.cancelled]:
            (self.waiting if seq in self.waiting else self.running).remove(seq)
            events.append(LLMEvent(seq.request_id, final=b"", status=499, message="cancelled"))
        while self.waiting and len(self.running) < self.capacity:
            self.running.append(self.waiting.pop(0))
        if self.step_s:
            time.sleep(self.step_s)
        for seq in list(self.running):
            seq.shared_steps += len(self.running) > 1
            events.append(LLMEvent(seq.request_id, chunk=f"t{seq.done} ".encode()))
            seq.done += 1
            if seq.done == seq.n:
                self.running.remove(seq)
                events.append(LLMEvent(seq.request_id, final=json.dumps(
                    {"tokens": seq.n, "sharedSteps": seq.shared_steps}).encode()))
        return events
