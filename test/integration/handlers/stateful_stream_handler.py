"""A stateful continuous-batching handler with no model (sequenceBatching + continuousBatching).

Each sequence keeps a running total of the numbers its requests add. A request (JSON
``{"add": n, "tag": x, "steps": k, "step_ms": t, "finish": bool}``) runs ``k`` steps, streaming one
chunk a step, then answers the sequence's state. ``"finish": true`` makes the handler end its sequence
with the ``ts_request_sequence_end`` response header. ``end_sequence`` (the frontend's
SEQUENCE_END) forgets a sequence. The answer also reports what the tests check: the sequences
this worker was told ended, the requests it saw cancelled, and the most sequences it ever ran in
one step. Two requests of one sequence at once are refused (the frontend must never do that).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from ts.llm.api.request import LLMEvent
from ts.llm.params import LLMRequestError

SEQ_ID = "ts_request_sequence_id"
SEQ_START = "ts_request_sequence_start"
SEQ_END = "ts_request_sequence_end"


@dataclass
class Running:
    request_id: str
    sequence: str
    steps: int
    end: bool
    done: int = 0
    cancelled: bool = False


class StatefulStreamHandler:
    def initialize(self, context) -> None:
        self.totals: dict[str, dict] = {}  # sequence id -> {"total", "turns", "seen"}
        self.running: dict[str, Running] = {}  # request id -> its run
        self.ended: list[str] = []  # sequences the frontend said closed
        self.cancelled: list[str] = []
        self.most_at_once = 0
        self.step_s = 0.0

    def handle(self, data, context):  # the plain path is unused with continuousBatching
        raise RuntimeError("called without continuousBatching")

    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        seq = headers.get(SEQ_ID)
        if not seq:
            raise LLMRequestError(400, "no ts_request_sequence_id header: the model must be stateful")
        if any(r.sequence == seq and not r.cancelled for r in self.running.values()):
            raise LLMRequestError(500, f"two requests of sequence {seq} at once")
        req = json.loads(body or b"{}")
        if headers.get(SEQ_START) == "true" or seq not in self.totals:
            self.totals[seq] = {"total": 0, "turns": 0, "seen": []}
        state = self.totals[seq]
        state["total"] += int(req.get("add", 0))
        state["turns"] += 1
        state["seen"].append(req.get("tag"))
        self.step_s = float(req.get("step_ms", 5)) / 1000
        self.running[request_id] = Running(request_id, seq, int(req.get("steps", 2)), bool(req.get("finish")))

    def cancel(self, request_id: str) -> None:
        run = self.running.get(request_id)
        if run is not None:
            run.cancelled = True

    def end_sequence(self, sequence_id: str) -> None:
        self.ended.append(sequence_id)
        self.totals.pop(sequence_id, None)

    def has_work(self) -> bool:
        return bool(self.running)

    def step(self) -> list[LLMEvent]:
        events: list[LLMEvent] = []
        for run in [r for r in self.running.values() if r.cancelled]:
            del self.running[run.request_id]
            self.cancelled.append(run.request_id)
            events.append(LLMEvent(run.request_id, final=b"", status=499, message="cancelled"))
        self.most_at_once = max(self.most_at_once, len({r.sequence for r in self.running.values()}))
        time.sleep(self.step_s)
        for run in list(self.running.values()):
            events.append(LLMEvent(run.request_id, chunk=f"s{run.done} ".encode()))
            run.done += 1
            if run.done >= run.steps:
                del self.running[run.request_id]
                events.append(self._final(run))
        return events

    def _final(self, run: Running) -> LLMEvent:
        state = self.totals.get(run.sequence, {})
        answer = {"sequence": run.sequence, "total": state.get("total"), "turns": state.get("turns"),
                  "seen": state.get("seen"), "pid": os.getpid(), "ended": self.ended,
                  "cancelled": self.cancelled, "mostAtOnce": self.most_at_once}
        headers = {}
        if run.end:  # the handler ends its sequence (TorchServe's sequence continuous batching)
            headers[SEQ_END] = run.sequence
            self.totals.pop(run.sequence, None)
        return LLMEvent(run.request_id, final=json.dumps(answer).encode(), headers=headers)
