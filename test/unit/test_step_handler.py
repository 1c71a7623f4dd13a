"""The rules of TorchServe-style continuous batching (ts/pipeline/step_handler.py): what each step
hands the handler, which answers keep a request running, the batchSize quota, cancel, errors.
The server end to end: test/integration/test_torchserve_continuous.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ts.context import Context, RequestProcessor
from ts.handler_utils.utils import send_intermediate_predict_response
from ts.model_loader import LoadError, LoadRequest
from ts.pipeline.loader import load_pipeline
from ts.pipeline.step_handler import StepHandler, StepPipeline, continues
from ts.protocol.codec import Part, Request, Response
from ts.service import STREAM_HEADER, Service, settle_stream_header
from ts.utils.ranks import RankInfo


class Recorder:
    """A TorchServe-style handler: answers ``s<k>`` per step; a request stops after its ``n``
    steps (its body), through ``context.stopping_criteria``; ``boom`` in a body raises."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, dict[str, Any], dict[str, Any]]]] = []
        self.left: dict[str, int] = {}

    def handle(self, data: list[dict[str, Any]], context: Context) -> list[str]:
        ids = list(context.request_ids.values())
        self.batches.append([(rid, row, context.get_all_request_header(i)) for i, (rid, row) in enumerate(zip(ids, data, strict=True))])
        for rid, row in zip(ids, data, strict=True):
            if row.get("body") == "boom":
                raise ValueError(f"cannot take {rid}")
            if row:
                self.left[rid] = int(row["body"])
        out = []
        for rid in ids:
            self.left[rid] -= 1
            out.append(f"s{self.left[rid]}")
        context.stopping_criteria = [lambda _out, r=rid: self.left[r] == 0 for rid in ids]
        return out


def make(batch_size: int, handler: Any = None) -> tuple[StepHandler, Any]:
    handler = handler or Recorder()
    context = Context("m", "/nonexistent", None, batch_size, None, "test")
    return StepHandler(Service("m", handler.handle, context, handler), batch_size), handler


def add(adapter: StepHandler, rid: str, body: str, headers: list[tuple[str, str]] | None = None) -> None:
    adapter.received[rid] = Request(rid, headers or [("X-Tag", rid)], [Part("body", "text/plain", body.encode())])
    adapter.add_request(rid, body.encode(), {})


def test_running_requests_come_first_as_cached_entries_then_new_ones_within_batch_size() -> None:
    adapter, h = make(batch_size=2)
    add(adapter, "a", "3")
    add(adapter, "b", "1")
    add(adapter, "c", "2")
    adapter.step()
    assert [(rid, row) for rid, row, _ in h.batches[0]] == [("a", {"body": "3"}), ("b", {"body": "1"})]
    adapter.step()  # b ended: a is re-sent (headers, no inputs), c joins
    assert [(rid, row) for rid, row, _ in h.batches[1]] == [("a", {}), ("c", {"body": "2"})]
    assert h.batches[1][0][2] == {"X-Tag": "a"}
    while adapter.has_work():
        adapter.step()
    assert all(len(batch) <= 2 for batch in h.batches)


def test_batch_size_counts_sequences_so_a_sequences_next_request_joins_its_running_one() -> None:
    """TorchServe 0.12's test_infer_stateful_cancel (batchSize 1): the "-1" request of the sequence
    that streams joins it in the next step; another sequence's request waits for the quota."""
    adapter, h = make(batch_size=1)
    add(adapter, "stream", "5", [("ts_request_sequence_id", "s")])
    adapter.step()
    add(adapter, "other", "1", [("ts_request_sequence_id", "t")])
    add(adapter, "cancel", "1", [("ts_request_sequence_id", "s")])
    add(adapter, "plain", "1")
    adapter.step()
    assert [rid for rid, _, _ in h.batches[1]] == ["stream"], "the next waiting one is another sequence's: it waits"
    adapter, h = make(batch_size=1)
    add(adapter, "stream", "5", [("ts_request_sequence_id", "s")])
    adapter.step()
    add(adapter, "cancel", "1", [("ts_request_sequence_id", "s")])
    adapter.step()
    assert [rid for rid, _, _ in h.batches[1]] == ["stream", "cancel"]


def test_a_request_streams_while_its_criterion_says_go_on_then_ends() -> None:
    adapter, _ = make(batch_size=4)
    add(adapter, "a", "3")
    events = [ev for _ in range(3) for ev in adapter.step()]
    assert [(ev.chunk, ev.final) for ev in events] == [(b"s2", None), (b"s1", None), (None, b"s0")]
    assert events[0].headers[STREAM_HEADER] == "true" and events[-1].headers[STREAM_HEADER] == "false"
    assert not adapter.has_work()


def test_without_criteria_a_true_header_becomes_false_and_none_leaves_it() -> None:
    ctx = Context("m", "/nonexistent", None, 1, None, "test")
    ctx.set_batch({0: "a", 1: "b"}, [RequestProcessor({}), RequestProcessor({})])
    ctx.set_response_header(0, STREAM_HEADER, "true")
    settle_stream_header(ctx, 0, "x")
    settle_stream_header(ctx, 1, "x")
    assert ctx.get_response_headers(0) == {STREAM_HEADER: "false"} and ctx.get_response_headers(1) == {}
    ctx.stopping_criteria = [lambda _: None, lambda _: False]
    ctx.set_response_header(0, STREAM_HEADER, "true")
    settle_stream_header(ctx, 0, "x")
    settle_stream_header(ctx, 1, "x")
    assert ctx.get_response_headers(0)[STREAM_HEADER] == "true"  # None: the handler's own header stands
    assert ctx.get_response_headers(1)[STREAM_HEADER] == "true"


@pytest.mark.parametrize(("headers", "running"), [
    ([], False), ([(STREAM_HEADER, "false")], False), ([(STREAM_HEADER, "true")], True),
    ([(STREAM_HEADER, "yes")], True),  # TorchServe's frontend ends a request only on absent/false
])
def test_continues_follows_torchserves_frontend(headers, running) -> None:
    assert continues(Response("a", headers=headers)) is running


def test_cancel_drops_a_running_or_a_waiting_request() -> None:
    adapter, h = make(batch_size=1)
    add(adapter, "a", "5")
    add(adapter, "b", "5")
    adapter.step()
    adapter.cancel("b")  # waiting
    adapter.cancel("a")  # running
    assert not adapter.has_work()
    add(adapter, "c", "1")
    adapter.step()
    assert [rid for rid, _, _ in h.batches[-1]] == ["c"]


def test_a_handler_error_ends_that_steps_requests_and_leaves_the_waiting_ones() -> None:
    adapter, h = make(batch_size=2)
    add(adapter, "a", "4")
    adapter.step()
    add(adapter, "b", "boom")
    add(adapter, "c", "1")
    events = adapter.step()
    assert [(ev.request_id, ev.final, ev.status) for ev in events] == [("a", b"", 500), ("b", b"", 500)]
    assert events[1].message == "ValueError: cannot take b"
    assert [ev.final for ev in adapter.step()] == [b"s0"]  # c ran after them
    assert not adapter.has_work()


def test_send_intermediate_predict_response_goes_out_during_the_step() -> None:
    sent: list[list[Response]] = []

    class Streaming:
        def handle(self, data, context):
            send_intermediate_predict_response(["p"] * len(data), context.request_ids, "Intermediate", 200, context)
            assert sent, "the piece went out before handle returned"
            return ["done"] * len(data)

    adapter, _ = make(batch_size=2, handler=Streaming())
    adapter.send_chunks = sent.append
    add(adapter, "a", "x")
    (event,) = adapter.step()
    assert [(r.request_id, r.body, dict(r.headers)[STREAM_HEADER]) for r in sent[0]] == [("a", b"p", "true")]
    assert event.final == b"done" and event.headers[STREAM_HEADER] == "false"
    assert adapter.service.context.stream_sender is None


HANDLERS = Path(__file__).resolve().parents[1] / "integration" / "handlers"


def load(tmp_path: Path, handler_file: str, ranks: RankInfo) -> Any:
    model_dir = tmp_path / "m"
    (model_dir / "MAR-INF").mkdir(parents=True)
    shutil.copy(HANDLERS / handler_file, model_dir / handler_file)
    model = {"modelName": "m", "handler": handler_file, "modelVersion": "1.0"}
    (model_dir / "MAR-INF" / "MANIFEST.json").write_text(json.dumps({"runtime": "python", "model": model}))
    req = LoadRequest.from_json({"modelName": "m", "modelPath": str(model_dir), "batchSize": 3,
                                 "continuousBatching": True})
    return load_pipeline(req, None, ranks, lambda *frames: None)


def test_a_handler_without_hooks_gets_the_adapter_with_the_models_batch_size(tmp_path: Path) -> None:
    pipeline = load(tmp_path, "ts_generator_handler.py", RankInfo())
    assert isinstance(pipeline, StepPipeline) and pipeline.adapter.batch_size == 3


def test_one_with_some_hooks_is_refused_naming_the_rest(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"lacks has_work\(\), cancel\(\)"):
        load(tmp_path, "partial_hooks_handler.py", RankInfo())


def test_the_adapter_on_several_ranks_is_refused_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="runs on one rank only, but this worker has 2 ranks"):
        load(tmp_path, "ts_generator_handler.py", RankInfo(world_size=2, local_world_size=2))
