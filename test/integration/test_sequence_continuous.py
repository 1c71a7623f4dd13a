"""Stateful sequences with continuous batching (sequenceBatching + continuousBatching, TorchServe's
sequence continuous batching) through a real server: several sequences' requests run in one
worker at once, each sequence's requests one at a time and in order, its state kept; a
sequence ends by the handler's ``ts_request_sequence_end`` answer header, by the client's end
header or after sequenceMaxIdleMSec idle, and the worker is told (SEQUENCE_END); cancelling a
queued request drops it without disturbing the running one, cancelling a running one frees its
slot. The handler is handlers/stateful_stream_handler.py (no model)."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from pathlib import Path

import grpc
import pytest
import requests
from grpc_support import compile_stubs

import harness

pytestmark = pytest.mark.slow

HANDLER = Path(__file__).resolve().parent / "handlers" / "stateful_stream_handler.py"
SEQ = "ts_request_sequence_id"
IDLE_MS = 1500


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "seqcb", HANDLER, config_yaml=(
        f"sequenceBatching: true\ncontinuousBatching: true\nsequenceMaxIdleMSec: {IDLE_MS}\n"
        "maxSequenceJobQueueSize: 4\nmaxNumSequence: 16\nbatchSize: 4\nminWorkers: 1\nmaxWorkers: 1\n"))
    with harness.Server(store) as s:
        r = s.register("seqcb.mar", synchronous="true")
        assert r.status_code == 200, r.text
        yield s


def new_id() -> str:
    return f"seq-{uuid.uuid4().hex[:8]}"


def send(server: harness.Server, seq: str | None, timeout: float = 60, end: bool = False,
         **body) -> requests.Response:
    headers = {"Content-Type": "application/json"}
    if seq is not None:
        headers[SEQ] = seq
    if end:
        headers["ts_request_sequence_end"] = "true"
    return requests.post(f"{server.inference_url}/predictions/seqcb", data=json.dumps(body), headers=headers,
                         stream=True, timeout=timeout)


def close(server: harness.Server, seq: str) -> None:
    """Ends a sequence with the client's end header."""
    answer(send(server, seq, end=True))


def started(r: requests.Response):
    """Waits for a streamed answer's first chunk; returns the chunk iterator, which must stay
    referenced while the request should run (dropping it closes the connection: a cancel)."""
    chunks = r.iter_content(chunk_size=None)
    assert next(chunks).startswith(b"s0")
    return chunks


def answer(r: requests.Response) -> dict:
    """The final answer after the streamed step chunks (``s0 s1 ... {json}``)."""
    assert r.status_code == 200, r.text
    text = b"".join(r.iter_content(chunk_size=None)).decode()
    return json.loads(text[text.index("{"):])


def pending(server: harness.Server) -> int:
    d = requests.get(f"{server.management_url}/models/seqcb", timeout=30).json()[0]
    return d["jobQueueStatus"]["pendingRequests"]


def test_a_new_sequence_gets_its_id_on_the_first_chunk_and_keeps_its_state(server: harness.Server) -> None:
    first = send(server, None, add=5, tag=0)
    seq = first.headers[SEQ]
    assert seq.startswith("ts-seq-"), "the generated id comes with the stream's headers"
    assert answer(first)["total"] == 5
    second = answer(send(server, seq, add=2, tag=1))
    assert (second["total"], second["turns"], second["seen"]) == (7, 2, [0, 1])
    close(server, seq)


def test_sequences_interleave_in_one_worker_each_in_order(server: harness.Server) -> None:
    seqs = [new_id() for _ in range(3)]
    results: dict[str, list[dict]] = {s: [] for s in seqs}

    def client(seq: str) -> None:
        for k in range(3):
            results[seq].append(answer(send(server, seq, add=k + 1, tag=k, steps=5, step_ms=10)))

    # a long request of another sequence runs while the three clients go: they join its batch
    long = send(server, new_id(), steps=100_000, step_ms=10)
    long_chunks = started(long)
    threads = [threading.Thread(target=client, args=(s,)) for s in seqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    long.close()
    del long_chunks
    for seq in seqs:
        got = results[seq]
        assert [a["seen"] for a in got] == [[0], [0, 1], [0, 1, 2]], "each sequence's requests in order"
        assert [a["total"] for a in got] == [1, 3, 6]
        assert len({a["pid"] for a in got}) == 1
    assert max(a["mostAtOnce"] for s in seqs for a in results[s]) >= 2, "sequences shared steps"


def test_concurrent_requests_of_one_sequence_run_one_at_a_time(server: harness.Server) -> None:
    seq = new_id()
    out: list[dict] = []

    def one(k: int) -> None:
        out.append(answer(send(server, seq, add=1, tag=k, steps=5)))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(a["total"] for a in out) == [1, 2, 3, 4], "a request overlapped another of its sequence"
    close(server, seq)


def test_the_handler_ends_a_sequence_by_its_answer_header(server: harness.Server) -> None:
    seq = new_id()
    assert answer(send(server, seq, add=3))["total"] == 3
    assert answer(send(server, seq, add=1, finish=True))["total"] == 4
    again = answer(send(server, seq, add=10))
    assert (again["total"], again["turns"]) == (10, 1), "ended: the same id starts a new sequence"
    assert seq in again["ended"], "the worker was told the sequence closed"


def test_the_clients_end_header_closes_the_sequence_after_that_request(server: harness.Server) -> None:
    seq = new_id()
    assert answer(send(server, seq, add=3))["total"] == 3
    assert answer(send(server, seq, add=1, end=True))["total"] == 4
    again = answer(send(server, seq, add=10))
    assert (again["total"], again["turns"]) == (10, 1)
    assert seq in again["ended"]


def test_an_idle_sequence_expires_and_the_worker_is_told(server: harness.Server) -> None:
    idle = new_id()
    assert answer(send(server, idle, add=40))["total"] == 40
    other = new_id()
    # poll through another sequence until the worker heard that the idle one closed
    seen = harness.wait_for(lambda: idle in answer(send(server, other, add=0))["ended"], timeout=IDLE_MS / 1000 + 10,
                            interval=0.2, what=f"SEQUENCE_END for {idle}")
    assert seen
    again = send(server, idle, add=1)
    assert again.status_code == 503 and "expired after sequenceMaxIdleMSec" in again.json()["message"], again.text


def raw_request(server: harness.Server, seq: str, body: dict) -> socket.socket:
    """Sends a request on a socket of its own and returns the socket (close it to cancel)."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", server.inference_port), timeout=30)
    sock.sendall(b"POST /predictions/seqcb HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 + f"{SEQ}: {seq}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def test_cancelling_a_queued_request_drops_it_and_the_running_one_goes_on(server: harness.Server) -> None:
    seq = new_id()
    running = send(server, seq, add=1, tag="first", steps=100_000, step_ms=10)
    chunks = started(running)
    second: list[dict] = []
    waiter = threading.Thread(target=lambda: second.append(answer(send(server, seq, add=2, tag="second"))))
    waiter.start()
    harness.wait_for(lambda: pending(server) == 1, timeout=30, what="the second request waiting")
    third = raw_request(server, seq, {"add": 100, "tag": "third"})
    harness.wait_for(lambda: pending(server) == 2, timeout=30, what="the third request waiting")
    third.close()  # the client of the last queued request goes away
    harness.wait_for(lambda: pending(server) == 1, timeout=30, what="the cancelled request dropped")
    assert not second, "the second request must wait for the running one"
    running.close()  # now the running one is cancelled: the second takes the sequence's turn
    del chunks
    waiter.join(timeout=60)
    assert second, "the second request was answered after the running one was cancelled"
    got = second[0]
    assert got["seen"] == ["first", "second"] and got["total"] == 3, "the cancelled request never ran"
    assert running.headers["x-request-id"] in got["cancelled"], "the running request was cancelled in the worker"
    close(server, seq)


def test_full_limits_are_503_naming_them(server: harness.Server) -> None:
    seq = new_id()
    running = send(server, seq, steps=100_000, step_ms=10)
    chunks = started(running)
    waiters = [threading.Thread(target=lambda: send(server, seq, steps=1).close()) for _ in range(4)]
    for t in waiters:
        t.start()
    harness.wait_for(lambda: pending(server) == 4, timeout=30, what="four requests waiting")
    r = send(server, seq)
    assert r.status_code == 503 and "maxSequenceJobQueueSize" in r.json()["message"]
    running.close()
    del chunks
    for t in waiters:
        t.join(timeout=60)
    close(server, seq)


# ---------------------------------------------------------------------------- gRPC


def test_grpc_stream_predictions2_keeps_the_sequence_state(server: harness.Server,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    stubs = compile_stubs(tmp_path_factory.mktemp("stubs"))
    seq = new_id()
    reqs = [stubs.inference_pb2.PredictionsRequest(model_name="seqcb", sequenceId=seq,
                                                   input={"data": json.dumps({"add": k, "tag": k}).encode()})
            for k in (1, 2, 3)]
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_inference_port}") as ch:
        stub = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch)
        out = list(stub.StreamPredictions2(iter(reqs), timeout=60))
    assert all(r.sequenceId == seq and not r.HasField("status") for r in out)
    finals = [json.loads(r.prediction) for r in out if r.prediction.startswith(b"{")]
    assert [f["total"] for f in finals] == [1, 3, 6]
    assert [r.prediction for r in out if not r.prediction.startswith(b"{")][:2] == [b"s0 ", b"s1 "], "streamed"
    close(server, seq)
