"""The one path from a handler's context.metrics to the frontend (ts/metrics/outbox.py): what it
takes and sends, continuous batching's cadence, and that every pipeline goes through it.
End to end (a continuous-batching handler's metric on /metrics): test/integration/test_metrics.py."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from ts.llm.api.request import LLMEvent
from ts.metrics.metric_cache_abstract import MetricCacheAbstract
from ts.metrics.outbox import MetricsOutbox, take_records
from ts.pipeline.continuous import ContinuousPipeline
from ts.protocol.codec import FrameType, Part, Request, Response, decode_frame, decode_json_body

PIPELINES = Path(__file__).resolve().parents[2] / "ts" / "pipeline"


class Wire:
    """Worker.send stand-in: each call is one write of frames."""

    def __init__(self) -> None:
        self.writes: list[list[tuple[FrameType, int, bytes]]] = []

    def __call__(self, *frames: bytes) -> None:
        self.writes.append([(f.type, f.batch_id, f.body) for f in map(decode_frame, frames)])

    def types(self) -> list[list[FrameType]]:
        return [[t for t, _, _ in w] for w in self.writes]


def cache_with(*names: str) -> MetricCacheAbstract:
    cache = MetricCacheAbstract(model_name="m")
    for name in names:
        cache.add_counter(name, 1)
    return cache


def test_take_empties_the_cache_and_a_model_without_metrics_has_none() -> None:
    outbox = MetricsOutbox(cache_with("A", "B"), Wire())
    assert [r["name"] for r in outbox.take()] == ["A", "B"]
    assert outbox.take() == [] and take_records(None) == []


def test_send_answer_writes_metrics_then_result_together() -> None:
    # the frontend records the metrics before it answers: TorchServe 0.12's test_metrics reads
    # model_metrics.log as soon as its prediction is answered
    wire = Wire()
    outbox = MetricsOutbox(None, wire)
    outbox.send_answer(7, [Response("r1", 200, body=b"x")], [{"name": "A"}])
    outbox.send_answer(8, [Response("r2", 200, body=b"y")], [])
    assert wire.types() == [[FrameType.METRICS, FrameType.RESULT], [FrameType.RESULT]]
    assert decode_json_body(wire.writes[0][0][2]) == [{"name": "A"}]


def test_flush_appends_to_the_callers_write_or_sends_alone() -> None:
    wire, cache = Wire(), cache_with("A")
    outbox = MetricsOutbox(cache, wire)
    out: list[bytes] = []
    outbox.flush(out)
    assert [decode_frame(f).type for f in out] == [FrameType.METRICS] and decode_frame(out[0]).batch_id == 0
    cache.add_counter("B", 1)
    outbox.flush()
    outbox.flush()  # nothing new: no frame
    assert wire.types() == [[FrameType.METRICS]]


def test_a_rank_that_does_not_answer_takes_and_drops() -> None:
    wire, cache = Wire(), cache_with("A")
    outbox = MetricsOutbox(cache, wire, answer=False)
    outbox.flush()
    outbox.send_answer(1, [], [{"name": "A"}])
    assert wire.writes == [] and cache.drain() == []


def test_tick_flushes_when_a_request_ended_or_the_interval_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("ts.metrics.outbox.time.monotonic", lambda: now[0])
    wire, cache = Wire(), cache_with("A")
    outbox = MetricsOutbox(cache, wire, interval_s=1.0)
    outbox.tick(ended=False)
    assert wire.writes == []  # a step of a running request: held
    outbox.tick(ended=True)
    assert wire.types() == [[FrameType.METRICS]]
    cache.add_counter("B", 1)
    now[0] += 1.0
    outbox.tick(ended=False)  # a long request: at least once per interval
    assert len(wire.writes) == 2


class Counter:
    """Continuous-batching hooks: each request runs ``n`` steps (its body) and records a metric a step."""

    def __init__(self, cache: MetricCacheAbstract) -> None:
        self.cache, self.left = cache, {}

    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        self.left[request_id] = int(body)

    def has_work(self) -> bool:
        return bool(self.left)

    def cancel(self, request_id: str) -> None:
        self.left.pop(request_id, None)

    def step(self) -> list[LLMEvent]:
        events = []
        for rid in list(self.left):
            self.cache.add_counter("Tokens", 1)
            self.left[rid] -= 1
            if self.left[rid]:
                events.append(LLMEvent(rid, chunk=b"t"))
            else:
                del self.left[rid]
                events.append(LLMEvent(rid, final=b"done"))
        return events


def test_continuous_batching_sends_the_metrics_with_a_finished_request() -> None:
    cache, wire = cache_with(), Wire()
    handler = Counter(cache)
    pipeline = ContinuousPipeline(SimpleNamespace(handler=handler, context=SimpleNamespace(metrics=cache)), wire)
    pipeline.submit(1, [Request("r1", [], [Part("body", "", b"3")])], 0.0)
    while pipeline.has_work():
        pipeline.step()
    # two steps stream a chunk each (no METRICS: too often); the last answers and reports all three
    assert wire.types() == [[FrameType.CHUNK], [FrameType.CHUNK], [FrameType.METRICS, FrameType.RESULT]]
    assert [r["value"] for r in decode_json_body(wire.writes[-1][0][2])] == [1, 1, 1]


@pytest.mark.parametrize("module", ["sync.py", "pooled.py", "child.py", "continuous.py", "step_handler.py"])
def test_every_pipeline_goes_through_the_outbox(module: str) -> None:
    """No pipeline drains the handler's cache or writes a METRICS frame of its own."""
    source = (PIPELINES / module).read_text()
    assert not re.search(r"metrics\.drain\(|FrameType\.METRICS|encode_answer", source), module
    uses = "ContinuousPipeline" if module == "step_handler.py" else r"MetricsOutbox|take_records"
    assert re.search(uses, source), module
