"""LLMHandler on a stateful model (sequenceBatching): a sequence is a conversation. Each turn is
given the earlier turns' prompt and generated ids, then its own prompt ids; greedy tokens equal
``model.generate`` on exactly that concatenation. Start, SEQUENCE_END, cancel and refusal leave
the conversation as documented (ts/llm/handler/sessions.py)."""

from __future__ import annotations

import json

import pytest
from llm_support import model_dir_fixture, model_fixture, one_thread_fixture, reference, tok_fixture  # noqa: F401 - fixtures

from ts.context import Context
from ts.llm.handler.sessions import Conversations
from ts.model_settings import ModelSettings
from ts.torch_handler.llm_handler import LLMHandler, LLMRequestError

SEQ = "ts_request_sequence_id"
START = "ts_request_sequence_start"
N = 5


def make_handler(model_dir, stateful: bool) -> LLMHandler:
    cfg = {"handler": {"max_new_tokens": N, "max_context": 96}}
    ctx = Context("tiny", str(model_dir), {"model": {}}, 4, None, "test", model_yaml_config=cfg,
                  model_settings=ModelSettings(batchSize=4, sequenceBatching=stateful))
    h = LLMHandler()
    h.initialize(ctx)
    return h


@pytest.fixture(scope="module")
def handler(model_dir):
    return make_handler(model_dir, stateful=True)


def run(h: LLMHandler, request_id: str, prompt: str, headers: dict[str, str]) -> dict:
    h.add_request(request_id, json.dumps({"prompt": prompt, "max_new_tokens": N}).encode(), headers)
    final = None
    while h.has_work():
        for e in h.step():
            if e.request_id == request_id and e.final is not None:
                final = e
    assert final is not None and final.status == 200, final
    return json.loads(final.final)


def text_of(h: LLMHandler, ids: list[int]) -> str:
    return h.tokenizer.decode(ids, skip_special_tokens=True)


def test_each_turn_continues_the_conversation_exactly(handler) -> None:
    h = handler
    a, b, c = (h.tokenizer(p)["input_ids"] for p in ("Hello there", " and then", " at last"))
    out_a = reference(h.model, a, N)
    out_b = reference(h.model, a + out_a + b, N)
    out_c = reference(h.model, a + out_a + b + out_b + c, N)
    assert out_b != reference(h.model, b, N), "the prompts must tell a conversation from a fresh start"
    first = run(h, "t1", "Hello there", {SEQ: "chat-1", START: "true"})
    assert first["text"] == text_of(h, out_a)
    assert run(h, "t2", " and then", {SEQ: "chat-1"})["text"] == text_of(h, out_b)
    assert run(h, "t3", " at last", {SEQ: "chat-1"})["text"] == text_of(h, out_c)
    # another sequence at the same time is its own conversation
    assert run(h, "o1", " and then", {SEQ: "chat-2", START: "true"})["text"] == text_of(h, reference(h.model, b, N))


def test_start_and_sequence_end_begin_afresh(handler) -> None:
    h = handler
    ids = h.tokenizer("Once upon")["input_ids"]
    fresh = text_of(h, reference(h.model, ids, N))
    run(h, "s1", "Hello there", {SEQ: "chat-3", START: "true"})
    assert run(h, "s2", "Once upon", {SEQ: "chat-3", START: "true"})["text"] == fresh, "start resets"
    h.end_sequence("chat-3")
    assert run(h, "s3", "Once upon", {SEQ: "chat-3"})["text"] == fresh, "SEQUENCE_END forgot it"
    h.end_sequence("never-opened")  # an unknown id is fine


def test_a_cancelled_or_refused_turn_leaves_the_conversation_as_it_was(handler) -> None:
    h = handler
    a, b = h.tokenizer("Hello there")["input_ids"], h.tokenizer(" and then")["input_ids"]
    out_a = reference(h.model, a, N)
    run(h, "c1", "Hello there", {SEQ: "chat-4", START: "true"})
    h.add_request("c2", json.dumps({"prompt": " something else"}).encode(), {SEQ: "chat-4"})
    h.cancel("c2")
    while h.has_work():
        h.step()
    with pytest.raises(LLMRequestError, match="context"):
        h.add_request("c3", json.dumps({"prompt": "word " * 120}).encode(), {SEQ: "chat-4"})
    want = text_of(h, reference(h.model, a + out_a + b, N))
    assert run(h, "c4", " and then", {SEQ: "chat-4"})["text"] == want


def test_without_sequence_batching_the_header_keeps_no_state(model_dir) -> None:
    h = make_handler(model_dir, stateful=False)
    ids = h.tokenizer(" and then")["input_ids"]
    run(h, "p1", "Hello there", {SEQ: "client-made"})
    assert run(h, "p2", " and then", {SEQ: "client-made"})["text"] == text_of(h, reference(h.model, ids, N))
    assert h.conversations.held() == 0


def test_conversations_bookkeeping() -> None:
    c = Conversations(enabled=True)
    assert c.prompt("r1", {SEQ: "s"}, [1, 2]) == [1, 2]
    c.generated("r1", [3])
    c.finished("r1", completed=True)
    assert c.prompt("r2", {SEQ: "s"}, [4]) == [1, 2, 3, 4]
    c.finished("r2", completed=False)
    assert c.prompt("r3", {SEQ: "s"}, [5]) == [1, 2, 3, 5]
    assert c.prompt("r4", {}, [9]) == [9]
    c.end("s")
    assert c.held() == 0
