"""The built-in LLM handler on a stateful model (sequenceBatching + continuousBatching), served for
real: a sequence is a conversation. Each turn's greedy tokens equal ``model.generate`` on the
earlier turns' prompt and output ids followed by the turn's own prompt ids (ts/llm/handler/sessions.py),
with two conversations running at once through the continuous engine; an ended sequence's id
starts a new conversation."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SEQ = "ts_request_sequence_id"
N = 8
CONFIG = ("minWorkers: 1\nmaxWorkers: 1\nbatchSize: 4\nresponseTimeout: 120\ncontinuousBatching: true\n"
          "sequenceBatching: true\nsequenceMaxIdleMSec: 60000\nmaxSequenceJobQueueSize: 2\n"
          "handler:\n  max_new_tokens: 8\n  max_context: 256\n  dtype: float32\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    config = store / "chat-config.yaml"
    config.write_text(CONFIG)
    spec = importlib.util.spec_from_file_location("llm_build_mar", ROOT / "examples" / "llm" / "build_mar.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(store, "chat_llm", config_file=config)
    config.unlink()
    with harness.Server(store, env={"HF_HUB_OFFLINE": "1"}) as s:
        r = s.register("chat_llm.mar", synchronous="true")
        assert r.status_code == 200, r.text
        yield s


@pytest.fixture(scope="module")
def reference_model():
    from ts.testing.tiny_llm import build_model, build_tokenizer

    tok = build_tokenizer()
    return tok, build_model(tok)


def turn(server: harness.Server, prompt: str, seq: str | None = None, **headers: str) -> requests.Response:
    hs = dict(headers)
    if seq is not None:
        hs[SEQ] = seq
    return requests.post(f"{server.inference_url}/predictions/chat_llm", headers=hs, timeout=120,
                         json={"prompt": prompt, "max_new_tokens": N, "temperature": 0})


def expected_turns(reference_model, prompts: list[str]) -> list[str]:
    """Each turn's greedy text given the whole conversation before it."""
    from llm_support import conversation_texts

    return conversation_texts(*reference_model, prompts, N)


def test_two_conversations_at_once_each_continue_their_own_history(server: harness.Server, reference_model) -> None:
    chats = {"left": ["Once upon a time", " and then", " in the end"],
             "right": ["the model server", " answered", " again"]}
    got: dict[str, list[str]] = {name: [] for name in chats}

    def talk(name: str) -> None:
        seq = None
        for prompt in chats[name]:
            r = turn(server, prompt, seq)
            assert r.status_code == 200, r.text
            seq = r.headers[SEQ]
            got[name].append(r.json()["text"])

    threads = [threading.Thread(target=talk, args=(name,)) for name in chats]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    for name, prompts in chats.items():
        assert got[name] == expected_turns(reference_model, prompts), name
    fresh = expected_turns(reference_model, [chats["left"][1]])[0]
    assert got["left"][1] != fresh, "the turn must depend on the conversation before it"


def test_an_ended_sequence_starts_a_new_conversation(server: harness.Server, reference_model) -> None:
    first = turn(server, "Once upon a time")
    seq = first.headers[SEQ]
    turn(server, " and then", seq, ts_request_sequence_end="true").raise_for_status()
    again = turn(server, " and then", seq)
    assert again.json()["text"] == expected_turns(reference_model, [" and then"])[0]
