"""Stateful sequences (sequenceBatching): a sequence's requests reach one worker one at a time, in
order; its id comes back on the answer; it ends on request or after sequenceMaxIdleMSec idle;
limits answer 503 naming them; a missing sequenceMaxIdleMSec is refused at registration."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

COUNTER = Path(__file__).resolve().parent / "handlers" / "stateful_counter_handler.py"
SEQ = "ts_request_sequence_id"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "counter", COUNTER, config_yaml=(
        "sequenceBatching: true\nsequenceMaxIdleMSec: 1500\nmaxSequenceJobQueueSize: 4\nmaxNumSequence: 6\n"
        "batchSize: 4\nmaxBatchDelay: 20\nminWorkers: 2\nmaxWorkers: 2\n"))
    harness.build_mar(store, "noidle", COUNTER, config_yaml="sequenceBatching: true\n")
    with harness.Server(store) as s:
        r = s.register("counter.mar", synchronous="true")
        assert r.status_code == 200, r.text
        yield s


def send(server: harness.Server, value: int, seq: str | None = None, end: bool = False) -> requests.Response:
    headers = {} if seq is None else {SEQ: seq}
    if end:
        headers["ts_request_sequence_end"] = "true"
    return requests.post(f"{server.inference_url}/predictions/counter", data=str(value), headers=headers, timeout=60)


def test_a_new_sequence_gets_an_id_and_keeps_its_state(server: harness.Server) -> None:
    first = send(server, 5)
    assert first.status_code == 200, first.text
    seq = first.headers[SEQ]
    assert seq.startswith("ts-seq-") and first.json() == {**first.json(), "sequence": seq, "total": 5}
    other = send(server, 100)
    assert other.headers[SEQ] != seq
    assert send(server, 2, seq).json()["total"] == 7
    assert send(server, 1000, other.headers[SEQ]).json()["total"] == 1100
    last = send(server, 3, seq, end=True)
    assert last.json()["total"] == 10 and last.headers[SEQ] == seq
    again = send(server, 1, seq)  # ended: the same id starts afresh
    assert again.json()["total"] == 1
    send(server, 0, seq, end=True)
    send(server, 0, other.headers[SEQ], end=True)


def test_concurrent_requests_of_one_sequence_run_one_at_a_time_on_one_worker(server: harness.Server) -> None:
    seq = send(server, 0).headers[SEQ]
    answers: list[dict] = []

    def one() -> None:
        r = send(server, 1, seq)
        assert r.status_code == 200, r.text
        answers.append(r.json())

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(a["total"] for a in answers) == [1, 2, 3, 4], "an update was lost: requests overlapped"
    assert len({a["pid"] for a in answers}) == 1
    send(server, 0, seq, end=True)


def test_sequences_spread_over_the_workers(server: harness.Server) -> None:
    seqs = [send(server, 1) for _ in range(2)]
    assert len({r.json()["pid"] for r in seqs}) == 2
    for r in seqs:
        send(server, 0, r.headers[SEQ], end=True)


def told_ended(server: harness.Server, pid: int, seq: str) -> bool:
    """Whether worker ``pid``'s handler heard (SEQUENCE_END) that ``seq`` ended: asks through a
    new one-request sequence, which lands on either worker."""
    r = send(server, 0, end=True).json()
    return r["pid"] == pid and seq in r["ended"]


def test_an_idle_sequence_expires(server: harness.Server) -> None:
    first = send(server, 40)
    seq, pid = first.headers[SEQ], first.json()["pid"]
    assert send(server, 2, seq).json()["total"] == 42
    time.sleep(2.0)  # past sequenceMaxIdleMSec=1500: the frontend closed it
    expired = send(server, 1, seq)  # TorchServe answers 503: the client learns its state was lost
    assert expired.status_code == 503, expired.text
    assert "expired after sequenceMaxIdleMSec=1500" in expired.json()["message"]
    harness.wait_for(lambda: told_ended(server, pid, seq), timeout=30, what="the handler's end_sequence call")


def test_too_many_open_sequences_is_503_naming_the_limit(server: harness.Server) -> None:
    opened = []
    try:
        for _ in range(6):
            r = send(server, 1)
            assert r.status_code == 200, r.text
            opened.append(r.headers[SEQ])
        r = send(server, 1)
        assert r.status_code == 503
        assert "maxNumSequence" in r.json()["message"]
    finally:
        for seq in opened:
            send(server, 0, seq, end=True)


def test_sequence_batching_without_an_idle_limit_is_refused(server: harness.Server) -> None:
    r = server.register("noidle.mar", synchronous="true")
    assert r.status_code == 400
    assert "sequenceMaxIdleMSec" in r.json()["message"]


def test_describe_shows_the_sequence_settings(server: harness.Server) -> None:
    d = requests.get(f"{server.management_url}/models/counter", timeout=30).json()[0]
    assert (d["stateful"], d["sequenceMaxIdleMSec"], d["maxNumSequence"], d["maxSequenceJobQueueSize"]) == (
        True, 1500, 6, 4)
