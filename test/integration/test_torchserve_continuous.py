"""TorchServe-style continuous batching through a real server (ts/pipeline/step_handler.py): a
handler with no tserve hooks runs unmodified; ``handle`` runs once per step with the running
requests re-sent as cached entries plus the new ones, within batchSize; a request streams while
its stopping criteria say so; a client that disconnects is dropped; a failing step fails only its
requests. Handlers: handlers/ts_generator_handler.py (class, stopping_criteria),
handlers/ts_intermediate_handler.py (module, send_intermediate_predict_response),
handlers/ts_stateful_handler.py (TorchServe's stateful sequence-continuous pattern)."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
import requests
from test_continuous_batching import long_request_running, stream

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
GENERATOR = HANDLERS / "ts_generator_handler.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    for name, batch in (("gen4", 4), ("gen2", 2), ("gen1", 1)):
        harness.build_mar(store, name, GENERATOR, config_yaml=f"continuousBatching: true\nbatchSize: {batch}\n")
    harness.build_mar(store, "inter", HANDLERS / "ts_intermediate_handler.py",
                      config_yaml="asyncCommunication: true\nbatchSize: 2\n")
    harness.build_mar(store, "seqts", HANDLERS / "ts_stateful_handler.py", config_yaml=(
        "sequenceBatching: true\ncontinuousBatching: true\nsequenceMaxIdleMSec: 10000\nbatchSize: 4\n"
        "maxNumSequence: 4\n"))
    with harness.Server(store) as s:
        for name in ("gen4", "gen2", "gen1", "inter", "seqts"):
            r = s.register(f"{name}.mar", initial_workers=1, synchronous="true")
            assert r.status_code == 200, r.text
        yield s


def tokens_then_summary(r: requests.Response) -> tuple[list[str], dict]:
    assert r.status_code == 200, r.text
    pieces = [p.decode() for p in r.iter_content(chunk_size=None)]
    text = "".join(pieces)
    start = text.index("{")
    return text[:start].split(), json.loads(text[start:])


def test_each_step_streams_one_token_in_order_then_the_final_answer(server: harness.Server) -> None:
    r = stream(server, "gen4", {"n": 5})
    assert r.headers.get("Transfer-Encoding") == "chunked"
    tokens, summary = tokens_then_summary(r)
    assert tokens == ["t0", "t1", "t2", "t3", "t4"]
    # first seen with its input, then re-sent 5 times as a cached entry (headers, no inputs)
    assert summary["tokens"] == 5 and summary["cached_rows"] == 5


def test_the_worker_log_says_which_way_it_batches(server: harness.Server) -> None:
    assert "continuous batching TorchServe's way" in server.logs("model_log.log")


def test_a_request_joins_the_running_batch_between_steps(server: harness.Server) -> None:
    with long_request_running(server, "gen4", {"n": 150, "step_ms": 20}) as long_done:
        tokens, summary = tokens_then_summary(stream(server, "gen4", {"n": 3, "step_ms": 20}))
        assert not long_done.is_set(), "the short request waited for the long one to finish"
    assert tokens == ["t0", "t1", "t2"]
    assert summary["joined_step"] > 1 and min(summary["batch_sizes"]) == 2, summary


def test_batch_size_bounds_running_plus_new_and_the_rest_wait(server: harness.Server) -> None:
    out: dict[int, tuple[list[str], dict]] = {}

    def one(i: int) -> None:
        out[i] = tokens_then_summary(stream(server, "gen2", {"n": 4, "step_ms": 10}))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(5)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120 - (time.monotonic() - started))
    assert sorted(out) == list(range(5))
    for tokens, summary in out.values():
        assert tokens == ["t0", "t1", "t2", "t3"]
        assert max(summary["batch_sizes"]) <= 2, summary
    # five requests, two at a time: some joined only after others had ended
    assert max(s["joined_step"] for _, s in out.values()) > 5


def test_a_client_that_disconnects_is_dropped_and_its_slot_freed(server: harness.Server) -> None:
    # gen1 runs one request at a time: unless the endless one is dropped the follow-up waits forever
    endless = stream(server, "gen1", {"n": 10**9, "step_ms": 5})
    assert next(endless.iter_content(chunk_size=None)).startswith(b"t0")
    endless.close()
    tokens, summary = tokens_then_summary(stream(server, "gen1", {"n": 2}, timeout=30))
    assert tokens == ["t0", "t1"]
    # the dropped request is no longer re-sent, so the handler let go of its state
    assert summary["cache_size"] == 1 and summary["batch_sizes"] == [1, 1, 1], summary


def test_a_failing_step_fails_only_its_requests_and_the_worker_goes_on(server: harness.Server) -> None:
    # gen1: the running request ends before the failing one starts, the next one after it
    first = stream(server, "gen1", {"n": 20, "step_ms": 10})
    first_chunks = first.iter_content(chunk_size=None)
    head = next(first_chunks)
    assert head.startswith(b"t0")
    failing: dict[str, requests.Response] = {}
    follow: dict[str, tuple[list[str], dict]] = {}
    t_fail = threading.Thread(target=lambda: failing.update(r=stream(server, "gen1", {"n": 2, "fail": True})))
    t_fail.start()
    harness.wait_for(lambda: pending(server, "gen1") == 0, 30, what="the failing request reached the worker")
    t_ok = threading.Thread(target=lambda: follow.update(r=tokens_then_summary(stream(server, "gen1", {"n": 2}))))
    t_ok.start()
    text = (head + b"".join(first_chunks)).decode()
    assert text[:text.index("{")].split() == [f"t{k}" for k in range(20)], text
    t_fail.join(timeout=60)
    t_ok.join(timeout=60)
    r = failing["r"]
    assert r.status_code == 500
    assert "ValueError: prefill refused request" in r.json()["message"]
    assert follow["r"][0] == ["t0", "t1"]


def pending(server: harness.Server, model: str) -> int:
    d = requests.get(f"{server.management_url}/models/{model}", timeout=30).json()[0]
    return d["jobQueueStatus"]["pendingRequests"]


def test_a_module_handler_streams_with_send_intermediate_predict_response(server: harness.Server) -> None:
    r = stream(server, "inter", {"any": 1})
    assert r.status_code == 200
    pieces = [p.decode() for p in r.iter_content(chunk_size=None)]
    assert "".join(pieces) == 'p0 p1 p2 {"cached": false}'
    assert len(pieces) >= 2, "the intermediate pieces come as chunks"


def test_handler_metrics_of_each_step_are_reported(server: harness.Server) -> None:
    tokens_then_summary(stream(server, "gen4", {"n": 2}))
    harness.wait_for(lambda: re.search(r"HandlerTime\.ms:[\d.]+\|#ModelName:gen4", server.logs("model_metrics.log")),
                     30, what="HandlerTime of gen4 in model_metrics.log")


SEQ = "ts_request_sequence_id"


def send_to_sequence(server: harness.Server, seq: str | None, value: int) -> requests.Response:
    headers = {"Content-Type": "text/plain", **({SEQ: seq} if seq else {})}
    return requests.post(f"{server.inference_url}/predictions/seqts", data=str(value), headers=headers,
                         stream=True, timeout=60)


def test_torchserves_stateful_sequence_pattern_runs_and_ends_sequences_by_header(server: harness.Server) -> None:
    first = send_to_sequence(server, None, 5)
    seq = first.headers[SEQ]
    assert seq.startswith("ts-seq-") and first.text == "5"
    streamed = send_to_sequence(server, seq, 3)  # odd: its criterion streams the total 3 more steps
    assert streamed.headers[SEQ] == seq
    assert b"".join(streamed.iter_content(chunk_size=None)) == b"8888"
    assert send_to_sequence(server, seq, 2).text == "10"
    last = send_to_sequence(server, seq, 0)
    assert last.text == "10" and last.headers["ts_request_sequence_end"] == seq
    assert send_to_sequence(server, seq, 7).text == "7", "ended by the handler: the same id starts anew"
