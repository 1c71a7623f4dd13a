"""Hostile LLM requests through a real server (examples/llm's tiny Llama, its engine process): every
field of every LLM route at its type's extremes gives a 400 (422 on OIP generate) naming the field,
or an answer, never a 500, and the worker lives on; and streams in flight when the engine process
dies end with an error event, not silently."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import psutil
import pytest
import requests
from llm_support import llm_server

import harness

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODEL = "tiny_llm"
GIANT = "x" * 200_000
# every JSON type at its extremes (a Python float NaN/Infinity goes out as the literal JSON parsers take)
EXTREMES = [2**64, -2**63 - 1, -1, 0, 10**30, float("nan"), float("inf"), float("-inf"), 1e308, 1e-308,
            "", "x\udfffy", GIANT, None, True, [], {}, [2**64], ["\ud800"], {"99999999999999999999": 1}]

CHAT_MESSAGES = [{"role": "user", "content": "Hello"}]
ROUTES = {
    # path, the smallest valid body, the fields the route takes (a field of generate goes in "parameters")
    "completions": ("/v1/completions", {"model": MODEL, "prompt": "Hello", "max_tokens": 1},
                    ["prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "n", "best_of", "stop",
                     "stop_token_ids", "logit_bias", "logprobs", "echo", "presence_penalty", "frequency_penalty",
                     "repetition_penalty", "min_p", "min_tokens", "ignore_eos", "response_format", "stream",
                     "truncate_prompt_tokens", "include_stop_str_in_output", "skip_special_tokens",
                     "guided_json", "guided_regex", "guided_choice", "suffix", "user"]),
    "chat": ("/v1/chat/completions", {"model": MODEL, "messages": CHAT_MESSAGES, "max_tokens": 1},
             ["messages", "max_tokens", "max_completion_tokens", "temperature", "seed", "n", "stop", "logprobs",
              "top_logprobs", "tools", "tool_choice", "response_format", "stream_options", "min_tokens",
              "guided_json"]),
    "generate": (f"/v2/models/{MODEL}/generate", {"text_input": "Hello", "parameters": {"max_tokens": 1}},
                 ["text_input", "max_tokens", "max_new_tokens", "temperature", "seed", "stop", "top_k"]),
    "torchserve": (f"/predictions/{MODEL}", {"prompt": "Hello", "max_new_tokens": 1},
                   ["prompt", "max_new_tokens", "temperature", "seed", "stop", "min_p"]),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    config = (ROOT / "examples" / "llm" / "model-config.yaml").read_text()  # its engine process, the paged cache
    with llm_server(tmp_path_factory.mktemp("llm"), MODEL, config) as s:
        yield s


def worker_pid(server: harness.Server) -> int:
    r = requests.get(f"{server.management_url}/models/{MODEL}", timeout=30)
    workers = r.json()[0]["workers"]
    assert len(workers) == 1 and workers[0]["status"] == "READY", workers
    return int(workers[0]["pid"])


def body_with(route: str, field: str, value: object) -> dict:
    _, base, _ = ROUTES[route]
    body = json.loads(json.dumps(base))
    if route == "generate" and field != "text_input":
        body["parameters"][field] = value
    else:
        body[field] = value
    return body


def post(server: harness.Server, path: str, body: dict) -> requests.Response:
    data = json.dumps(body, allow_nan=True)  # NaN / Infinity as the literals a lenient parser takes
    return requests.post(server.inference_url + path, data=data, timeout=120,
                         headers={"Content-Type": "application/json"})


def names_the_field(route: str, field: str, value: object, r: requests.Response) -> bool:
    body = r.json()
    text = json.dumps(body)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))) \
            and "malformed JSON" in text:
        return True  # NaN / Infinity are not JSON: on the OpenAI routes the frontend refuses the body
    if route in ("completions", "chat"):
        error = body["error"]
        return error.get("param") == field or field in error["message"]
    return field in text


def answered(route: str, r: requests.Response) -> bool:
    if "text/event-stream" in r.headers.get("Content-Type", ""):
        return r.text.rstrip().endswith("data: [DONE]") or '"done":true' in r.text
    body = r.json()
    return bool(body.get("choices") or "text_output" in body or "text" in body)


def test_every_field_at_its_extremes_is_a_400_naming_it_or_an_answer(server: harness.Server) -> None:
    pid = worker_pid(server)
    wrong = []
    for route, (path, _, fields) in ROUTES.items():
        for field in fields:
            for value in EXTREMES:
                shown = repr(value)[:40]
                try:
                    r = post(server, path, body_with(route, field, value))
                except requests.RequestException as exc:  # e.g. a status line too long to read
                    wrong.append(f"{route} {field}={shown}: {type(exc).__name__}: {str(exc)[:200]}")
                    continue
                if r.status_code == 200:
                    if not answered(route, r):
                        wrong.append(f"{route} {field}={shown}: 200 without an answer: {r.text[:200]}")
                elif r.status_code in (400, 422):
                    if not names_the_field(route, field, value, r):
                        wrong.append(f"{route} {field}={shown}: {r.status_code} not naming {field}: {r.text[:200]}")
                else:
                    wrong.append(f"{route} {field}={shown}: {r.status_code} {r.text[:200]}")
    for route, (path, base, _) in ROUTES.items():  # an integer past Python's int() digit limit
        raw = json.dumps(base).replace(": 1}", ": " + "1" * 5000 + "}", 1)
        assert "1" * 5000 in raw
        r = requests.post(server.inference_url + path, data=raw, timeout=60, headers={"Content-Type": "application/json"})
        if r.status_code not in (400, 422):
            wrong.append(f"{route} a 5000-digit integer: {r.status_code} {r.text[:200]}")
    assert not wrong, "\n".join(wrong[:200]) + f"\n({len(wrong)} in all)"
    assert worker_pid(server) == pid, "the worker died and was restarted"
    ok = post(server, "/v1/completions", {"model": MODEL, "prompt": "Hello", "max_tokens": 2})
    assert ok.status_code == 200 and ok.json()["choices"]


def engine_process(pid: int) -> psutil.Process:
    children = [c for c in psutil.Process(pid).children() if "spawn_main" in " ".join(c.cmdline())]
    assert len(children) == 1, [c.cmdline() for c in psutil.Process(pid).children()]
    return children[0]


def test_streams_in_flight_end_with_an_error_event_when_the_engine_process_dies(server: harness.Server) -> None:
    worker = worker_pid(server)
    core = engine_process(worker)
    ends: dict[int, str] = {}
    started = threading.Barrier(4)

    def stream(i: int) -> None:
        body = {"model": MODEL, "prompt": f"Story {i}:", "max_tokens": 200, "ignore_eos": True, "stream": True}
        with requests.post(server.inference_url + "/v1/completions", json=body, stream=True, timeout=120) as r:
            lines = r.iter_lines(decode_unicode=True)
            first = next(line for line in lines if line)
            started.wait(timeout=60)
            last = first
            for line in lines:
                if line:
                    last = line
            ends[i] = last

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    started.wait(timeout=60)
    core.send_signal(signal.SIGKILL)
    for t in threads:
        t.join(timeout=120)
    assert len(ends) == 3, ends
    for i, last in ends.items():
        assert last.startswith("data: {"), (i, last)
        error = json.loads(last[len("data: "):])["error"]
        assert error["type"] == "server_error" and "engine process" in error["message"], error
    def served() -> bool:
        # until the dying worker is replaced, a request is told 503 "... the worker restarts: retry",
        # or 500 "Worker died." when it reached the worker as it exited
        r = post(server, "/v1/completions", {"model": MODEL, "prompt": "Hello", "max_tokens": 2})
        assert r.status_code in (200, 503) or (r.status_code == 500 and "Worker died" in r.text), r.text
        return r.status_code == 200

    harness.wait_for(served, timeout=120, interval=1.0, what="an answer from the restarted worker")
    assert worker_pid(server) != worker
