"""The engine in a process of its own (``handler.engine_process``, ts/llm/process/engine_core.py and
engine_process.py): the same answers as the engine in the worker, refusals a step later, a
cancelled request freed in the core, a failed step and a killed core answered, and the core
stopped with the handler."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from multiprocessing import Pipe

import pytest
from llm_support import model_dir_fixture, model_fixture, one_thread_fixture, reference, tok_fixture  # noqa: F401 - fixtures

from ts.context import Context
from ts.handler_utils.distributed.config import ModelConfigError
from ts.llm.engine.generation import GenerationEngine
from ts.llm.process.engine_core import pack_update, run, unpack_update
from ts.llm.process.engine_process import EngineProcess, EngineStepFailed
from ts.model_settings import ModelSettings
from ts.torch_handler.llm_handler import LLMEvent, LLMHandler

pytestmark = pytest.mark.slow   # engine processes started and killed: make test runs them, test-quick does not

N = 6


def make_handler(model_dir, handler_cfg=None, batch_size=4, continuous=True) -> LLMHandler:
    cfg = {"handler": {"max_new_tokens": N, "max_context": 128, **(handler_cfg or {})}}
    ctx = Context("tiny", str(model_dir), {"model": {}}, batch_size, None, "test", model_yaml_config=cfg,
                  model_settings=ModelSettings(batchSize=batch_size, continuousBatching=continuous))
    h = LLMHandler()
    h.initialize(ctx)
    return h


@pytest.fixture(scope="module")
def handler(model_dir):
    h = make_handler(model_dir)
    yield h
    h.close()


def drain(h: LLMHandler, deadline_s: float = 60.0) -> dict[str, list[LLMEvent]]:
    events: dict[str, list[LLMEvent]] = {}
    deadline = time.monotonic() + deadline_s
    while h.has_work():
        assert time.monotonic() < deadline, "the engine process did not finish its requests"
        for e in h.step():
            events.setdefault(e.request_id, []).append(e)
    return events


def final(events: list[LLMEvent]) -> LLMEvent:
    ends = [e for e in events if e.final is not None]
    assert len(ends) == 1, events
    return ends[0]


def test_the_default_with_continuous_batching_is_a_process_and_its_answers_are_generates(handler, model, tok):
    assert isinstance(handler.engine, EngineProcess) and handler.model is None
    assert "in an engine process (pid" in handler.engine.forward_path
    assert handler.engine.max_context == 128 and handler.engine.max_batch_size == 4
    prompts = {"a": "Hello there", "b": "The quick brown fox jumps over", "c": "x", "d": "one two three four",
               "e": "Once upon a time"}  # five for four slots: one waits for a free one
    for rid, prompt in prompts.items():
        handler.add_request(rid, json.dumps({"prompt": prompt, "max_new_tokens": N}).encode(), {})
    events = drain(handler)
    for rid, prompt in prompts.items():
        want = tok.decode(reference(model, tok(prompt)["input_ids"], N), skip_special_tokens=True)
        body = json.loads(final(events[rid]).final)
        assert body["text"] == want and body["usage"]["completion_tokens"] == N
    assert handler.step_stages()["decode"] >= 0


def test_streamed_chunks_and_openai_answers_come_through_the_process(handler, model, tok):
    handler.add_request("s", json.dumps({"prompt": "Hello there", "max_new_tokens": N, "stream": True}).encode(), {})
    events = drain(handler)["s"]
    want = tok.decode(reference(model, tok("Hello there")["input_ids"], N), skip_special_tokens=True)
    assert b"".join(e.chunk or b"" for e in events) + (final(events).final or b"") == want.encode()
    handler.add_request("o", json.dumps({"model": "tiny", "prompt": "Hello there", "max_tokens": N, "temperature": 0}).encode(),
                        {"x-tserve-openai": "completions"})
    body = json.loads(final(drain(handler)["o"]).final)
    assert body["choices"][0]["text"] == want and body["object"] == "text_completion"


def test_the_text_is_the_engines_own_with_and_without_stop_strings(handler, model_dir):
    """The worker detokenizes what the engine process sends without text; a request with stop
    strings is detokenized in the engine process, which must find them to end the sequence."""
    in_worker = make_handler(model_dir, {"engine_process": False})
    in_worker.add_request("probe", json.dumps({"prompt": "Once upon a time", "max_new_tokens": 12}).encode(), {})
    first = json.loads(final(drain(in_worker)["probe"]).final)["text"]
    stop = first[len(first) // 2:len(first) // 2 + 2]  # a stop string met mid-answer
    bodies = {
        "plain": {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0},
        "stopped": {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "stop": [stop]},
        "sampled": {"prompt": "Hello there", "max_tokens": 10, "temperature": 0.9, "seed": 7, "n": 2,
                    "stream": True},
    }
    answers = {}
    for h in (in_worker, handler):
        for rid, body in bodies.items():
            h.add_request(rid, json.dumps(body).encode(), {"x-tserve-openai": "completions"})
        events = drain(h)
        answers[h is handler] = {rid: b"".join((e.chunk or b"") + (e.final or b"") for e in events[rid])
                                 for rid in bodies}
    assert json.loads(answers[True]["stopped"])["choices"][0]["finish_reason"] == "stop"
    for rid in ("plain", "stopped"):
        assert json.loads(answers[True][rid])["choices"] == json.loads(answers[False][rid])["choices"], rid
    texts = {side: sorted(line for line in a["sampled"].decode().split("\n\n") if '"text"' in line)
             for side, a in answers.items()}

    def only_text(lines: list[str]) -> list[tuple]:
        return sorted((c["index"], c["text"]) for line in lines for c in json.loads(line[6:])["choices"])
    assert only_text(texts[True]) == only_text(texts[False])


def test_a_prompt_past_the_context_is_refused_a_step_later_and_the_others_go_on(handler):
    handler.add_request("ok", json.dumps({"prompt": "Hello there", "max_new_tokens": N}).encode(), {})
    handler.add_request("long", json.dumps({"prompt": "x " * 300, "max_new_tokens": N}).encode(), {})
    # several prompts: the first fits, the second does not: the whole request is refused
    handler.add_request("two", json.dumps({"prompt": ["Hello", "x " * 300], "max_new_tokens": N}).encode(),
                        {"x-tserve-openai": "completions"})
    events = drain(handler)
    refused = final(events["long"])
    assert refused.status == 400 and b"max_context=128" in refused.final and b"shorten the prompt" in refused.final
    assert final(events["two"]).status == 400 and len(events["two"]) == 1
    assert final(events["ok"]).status == 200
    assert not handler.engine.has_work()


def test_a_full_queue_answers_503_with_retry_after(model_dir):
    h = make_handler(model_dir, {"max_waiting": 1}, batch_size=1)
    try:
        for rid in ("r1", "r2", "r3"):  # r1 runs, r2 waits, r3 finds the queue full
            h.add_request(rid, json.dumps({"prompt": "Hello there", "max_new_tokens": 40}).encode(), {})
        events = drain(h)
        full = final(events["r3"])
        assert full.status == 503 and full.headers == {"Retry-After": "1"} and b"max_waiting=1" in full.final
        assert final(events["r1"]).status == 200 and final(events["r2"]).status == 200
    finally:
        h.close()


def test_a_cancelled_request_gets_no_more_events_and_its_slot_is_freed_in_the_core(handler):
    handler.add_request("gone", json.dumps({"prompt": "Hello there", "max_new_tokens": 100}).encode(), {})
    deadline = time.monotonic() + 30
    while handler.engine.num_running == 0:  # running in the core
        assert time.monotonic() < deadline
        handler.step()
    handler.cancel("gone")
    handler.add_request("next", json.dumps({"prompt": "Hi", "max_new_tokens": 2}).encode(), {})
    events = drain(handler)
    assert "gone" not in events and final(events["next"]).status == 200
    assert handler.engine.num_running == 0  # the core's gauge after its last step


def test_a_failed_step_fails_every_request_with_the_cores_message(handler, monkeypatch):
    handler.add_request("f", json.dumps({"prompt": "Hello there", "max_new_tokens": 50}).encode(), {})

    def failed() -> list:
        raise EngineStepFailed("OutOfMemoryError: CUDA out of memory", oom=True)
    monkeypatch.setattr(handler.engine, "step", failed)
    events = handler.step()
    monkeypatch.undo()
    assert len(events) == 1 and events[0].status == 507 and b"out of memory" in events[0].final
    assert handler._broken is None  # the core is alive and empty: the worker goes on
    drain(handler)  # whatever the core still sent for "f" is dropped
    handler.add_request("after", json.dumps({"prompt": "Hi", "max_new_tokens": 2}).encode(), {})
    assert final(drain(handler)["after"]).status == 200


def test_the_cores_loop_reports_a_failed_step_and_serves_on(model, tok):
    engine = GenerationEngine(model, tok, max_batch_size=2, max_context=64)
    worker, core = Pipe(duplex=True)
    calls = {"n": 0}
    real_step = engine.step

    def step_once_failing():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real_step()
    engine.step = step_once_failing  # type: ignore[method-assign]
    from ts.llm.params import SamplingParams

    loop = threading.Thread(target=run, args=(engine, core, "tiny"), daemon=True)
    loop.start()
    worker.send(("add", [("a", tok("Hello")["input_ids"], [])], SamplingParams(max_new_tokens=2)))
    assert worker.poll(30)
    assert worker.recv() == ("failed", False, "RuntimeError: boom")
    assert not engine.has_work()  # every sequence dropped
    worker.send(("add", [("b", tok("Hello")["input_ids"], [])], SamplingParams(max_new_tokens=2)))
    seen = []
    while not any(u.finished for u in seen):
        assert worker.poll(30)
        kind, updates, _ = worker.recv()
        assert kind == "step"
        seen.extend(unpack_update(u) for u in updates)
    assert {u.seq_id for u in seen} == {"b"}
    worker.send(("stop",))
    loop.join(10)
    assert not loop.is_alive()


def test_the_cores_loop_reads_a_command_larger_than_the_pipe_while_it_steps(model, tok):
    """Commands are read between steps on the core's thread: a command past the pipe's buffer
    (a 2 MB prompt) blocks the worker's write only until the step in progress ends."""
    from ts.llm.params import SamplingParams

    engine = GenerationEngine(model, tok, max_batch_size=2, max_context=64)
    worker, core = Pipe(duplex=True)
    ended: list[str] = []

    def serve() -> None:
        try:
            run(engine, core, "tiny")
        except (EOFError, BrokenPipeError, ConnectionResetError) as exc:  # what core_main ends on
            ended.append(type(exc).__name__)
    loop = threading.Thread(target=serve, daemon=True)
    loop.start()
    worker.send(("add", [("a", tok("Hello")["input_ids"], [])], SamplingParams(max_new_tokens=40, ignore_eos=True)))
    assert worker.poll(30)  # "a" is stepping
    worker.send(("add", [("big", [5] * 500_000, [])], SamplingParams(max_new_tokens=2)))
    refused = None
    while refused is None:
        assert worker.poll(30)
        msg = worker.recv()
        if msg[0] == "refused":
            refused = msg
    assert refused[1] == "big" and refused[2] == 400 and "context" in refused[3]
    worker.close()  # the worker is gone: the loop ends on the pipe's end
    loop.join(10)
    assert not loop.is_alive() and ended


def test_a_killed_core_fails_what_is_in_flight_and_the_worker_leaves(model_dir, monkeypatch):
    h = make_handler(model_dir)
    left: list[str] = []
    monkeypatch.setattr(h, "_leave_job", left.append)  # the real one ends the worker process
    try:
        h.add_request("k", json.dumps({"prompt": "Hello there", "max_new_tokens": 100}).encode(), {})
        h.step()
        os.kill(h.engine.pid, signal.SIGKILL)
        events: list[LLMEvent] = []
        deadline = time.monotonic() + 30
        while not events:
            assert time.monotonic() < deadline
            events = [e for e in h.step() if e.final is not None]
        assert events[0].status == 500 and b"killed by SIGKILL" in events[0].final
        assert h.has_work()  # one more step: the one that leaves
        h.step()
        assert left and "killed by SIGKILL" in left[0]
    finally:
        h.close()


def test_a_step_update_crosses_the_pipe_whole():
    """Every field of an update but ``error`` (the worker's own, for a refusal) is carried: a field
    added to ``SequenceUpdate`` and not to ``pack_update`` fails here."""
    import dataclasses
    import pickle

    from ts.llm.params import SequenceUpdate, TokenLogprob

    sent = SequenceUpdate("req-1", [5, 7], "ab", True, "length", 11, 2, [TokenLogprob(5, -0.5, [(5, -0.5)])])
    assert all(getattr(sent, f.name) != f.default for f in dataclasses.fields(SequenceUpdate) if f.name != "error")
    got = unpack_update(pickle.loads(pickle.dumps(pack_update(sent))))
    assert got == sent


def test_close_stops_the_core(model_dir):
    h = make_handler(model_dir)
    pid = h.engine.pid
    h.close()
    assert not alive(pid)


def test_the_key_and_its_limits(model_dir):
    h = make_handler(model_dir, {"engine_process": False})
    assert isinstance(h.engine, GenerationEngine) and h.model is not None
    with pytest.raises(ModelConfigError, match="engine_process: true needs continuousBatching"):
        make_handler(model_dir, {"engine_process": True}, continuous=False)
    # a model-config error found in the core is the load's error, naming its key
    with pytest.raises(ModelConfigError, match="kv_cache_blocks needs the paged KV cache"):
        make_handler(model_dir, {"paged_kv_cache": False, "kv_cache_blocks": 8})


WORKER = """
import json, sys, time
from ts.context import Context
from ts.model_settings import ModelSettings
from ts.torch_handler.llm_handler import LLMHandler

if __name__ == "__main__":
    ctx = Context("tiny", sys.argv[1], {"model": {}}, 2, None, "test", model_yaml_config={"handler": {"max_context": 128}},
                  model_settings=ModelSettings(batchSize=2, continuousBatching=True))
    h = LLMHandler()
    h.initialize(ctx)
    h.add_request("r", json.dumps({"prompt": "Hello", "max_new_tokens": 100}).encode(), {})
    h.step()
    print("engine process", h.engine.pid, flush=True)
    time.sleep(300)
"""


def test_a_killed_worker_takes_its_engine_process_with_it(model_dir, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    worker = subprocess.Popen([sys.executable, str(script), str(model_dir)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    try:
        line = ""
        while not line.startswith("engine process"):  # the engine process logs to the same stdout
            line = worker.stdout.readline()
            assert line, "the worker ended before its engine process started"
        core = int(line.split()[-1])
        os.kill(core, 0)  # running
    finally:
        worker.kill()
        worker.wait(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not alive(core):
            return
        time.sleep(0.05)
    os.kill(core, signal.SIGKILL)
    pytest.fail(f"the engine process {core} outlived its worker")


def alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
