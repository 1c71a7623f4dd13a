"""Seeded framing fuzzing of the REST server over raw sockets (issue 27): the classes a client
library never sends. Each case is one connection carrying 1-5 pipelined requests, each drawn from:
a valid Content-Length request, a valid chunked one (random chunk sizes, extensions, trailers),
a URL-encoded form of 0-3000 fields, a slow prediction, and the malformed framings: Content-Length
beside chunked, two different Content-Lengths, transfer-coding lists other than ``chunked``, bad
chunk sizes, a chunk longer than it says.

Every request carries ``x-custom: <case>-<index>``, which the echo handler answers back, so the
oracle is exact: the requests before the first malformed one are answered in request order (200,
or 413 for a form over max_form_fields), the malformed one gets one 4xx/501 with
``Connection: close`` and the connection ends: nothing after it is ever answered. At the end the
server still answers and has logged no leaked buffer or escaped exception.

TSERVE_FUZZ_FRAMING_CASES (default 150, about 20 s) and TSERVE_FUZZ_SEED (default 27) size and
seed the run; the run also stops after TSERVE_FUZZ_FRAMING_S seconds (default 120) so that CI
stays bounded on a slow machine.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import harness
from benchmarks import rawhttp

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parents[1] / "integration" / "handlers"
CASES = int(os.environ.get("TSERVE_FUZZ_FRAMING_CASES", "150"))
SEED = int(os.environ.get("TSERVE_FUZZ_SEED", "27"))
BUDGET_S = float(os.environ.get("TSERVE_FUZZ_FRAMING_S", "120"))
MAX_FORM_FIELDS = 1000  # the key's default


@dataclass
class Req:
    data: bytes
    expect: int | None  # the status of a well-framed request; None: malformed (4xx/501, then close)


def head(tag: str, extra: str) -> str:
    return f"POST /predictions/echo HTTP/1.1\r\nHost: fuzz\r\nx-custom: {tag}\r\n{extra}"


def chunks(rng: random.Random, body: bytes) -> bytes:
    out, i = b"", 0
    while i < len(body):
        n = rng.randint(1, 40)
        ext = rng.choice(["", ";a=b", ";x"])
        out += f"{min(n, len(body) - i):x}{ext}\r\n".encode() + body[i:i + n] + b"\r\n"
        i += n
    return out + b"0\r\n" + rng.choice([b"", b"X-Trailer: t\r\n"]) + b"\r\n"


def valid_length(rng: random.Random, tag: str) -> Req:
    body = os.urandom(rng.randint(0, 200)).hex().encode()
    return Req(head(tag, f"Content-Length: {len(body)}\r\n\r\n").encode() + body, 200)


def valid_chunked(rng: random.Random, tag: str) -> Req:
    body = os.urandom(rng.randint(1, 200)).hex().encode()
    return Req(head(tag, "Transfer-Encoding: chunked\r\n\r\n").encode() + chunks(rng, body), 200)


def slow(rng: random.Random, tag: str) -> Req:
    body = f"sleep:{rng.choice([0.05, 0.2])}".encode()
    return Req(head(tag, f"Content-Length: {len(body)}\r\n\r\n").encode() + body, 200)


def form(rng: random.Random, tag: str) -> Req:
    n = rng.choice([0, 1, rng.randint(2, 999), MAX_FORM_FIELDS, MAX_FORM_FIELDS + 1, rng.randint(1001, 3000)])
    body = "&".join(f"f{i}={i}" for i in range(n)).encode()
    extra = f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n"
    return Req(head(tag, extra).encode() + body, 200 if n <= MAX_FORM_FIELDS else 413)


def length_and_chunked(rng: random.Random, tag: str) -> Req:
    body = chunks(rng, b"smuggle")
    extra = f"Content-Length: {rng.randint(0, len(body))}\r\nTransfer-Encoding: chunked\r\n\r\n"
    return Req(head(tag, extra).encode() + body, None)


def two_lengths(rng: random.Random, tag: str) -> Req:
    n = rng.randint(0, 20)
    return Req(head(tag, f"Content-Length: {n}\r\nContent-Length: {n + rng.randint(1, 5)}\r\n\r\n").encode()
               + b"x" * n, None)


def codings(rng: random.Random, tag: str) -> Req:
    names = rng.sample(["gzip", "identity", "deflate", "x-custom", "chunked", "chunked"], rng.randint(1, 3))
    if names == ["chunked"]:
        names = ["identity", "chunked"]
    return Req(head(tag, f"Transfer-Encoding: {', '.join(names)}\r\n\r\n").encode() + chunks(rng, b"abc"), None)


def bad_chunk(rng: random.Random, tag: str) -> Req:
    size = rng.choice([b"zz", b"-1", b"ffffffffffffffffffff", b"", b"3 3", b"0x3"])
    return Req(head(tag, "Transfer-Encoding: chunked\r\n\r\n").encode() + size + b"\r\nabc\r\n0\r\n\r\n", None)


def overlong_chunk(rng: random.Random, tag: str) -> Req:
    return Req(head(tag, "Transfer-Encoding: chunked\r\n\r\n").encode() + b"2\r\nabcdef\r\n0\r\n\r\n", None)


VALID: list[Callable[[random.Random, str], Req]] = [valid_length, valid_chunked, slow, form]
MALFORMED: list[Callable[[random.Random, str], Req]] = [length_and_chunked, two_lengths, codings, bad_chunk,
                                                        overlong_chunk]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("framing-fuzz")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    config = {"load_models": "echo.mar", "default_workers_per_model": 1}
    leaks = {"JAVA_TOOL_OPTIONS": "-Dio.netty.leakDetection.level=paranoid"}
    with harness.Server(store, config=config, env=leaks) as s:
        yield s


def check_case(port: int, case: int, reqs: list[Req]) -> bool:
    """Checks one connection's answers; true when the server reset it (closed with input unread)."""
    bad = next((i for i, r in enumerate(reqs) if r.expect is None), None)
    answered = len(reqs) if bad is None else bad + 1
    # all requests well framed: every one is answered, there is nothing more to wait for
    got = rawhttp.exchange(port, b"".join(r.data for r in reqs), expect=answered, timeout=20,
                           linger=0 if bad is None else 5)
    what = f"case {case}: {[r.data[:160] for r in reqs]} -> {got}"
    assert len(got.responses) == answered, what
    for i, resp in enumerate(got.responses):
        if i == bad:
            assert 400 <= resp.status < 500 or resp.status == 501, what
            assert resp.headers.get("connection") == "close", what
            assert "java." not in resp.body.decode(errors="replace"), what
            continue
        assert resp.status == reqs[i].expect, what
        if resp.status == 200:  # the answer is this request's, in request order
            assert json.loads(resp.body)["x_custom"] == f"{case}-{i}", what
    if bad is not None:
        assert got.closed and not got.rest, what
    return got.reset


def test_framing_fuzz(server: harness.Server) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    done = resets = 0
    for case in range(CASES):
        if time.monotonic() - started > BUDGET_S:
            break
        reqs = []
        for i in range(rng.randint(1, 5)):
            pick = rng.choice(MALFORMED) if rng.random() < 0.25 else rng.choice(VALID)
            reqs.append(pick(rng, f"{case}-{i}"))
        resets += check_case(server.inference_port, case, reqs)
        done += 1
    print(f"{done} framing cases in {time.monotonic() - started:.1f} s; {resets} connections ended by a reset")
    assert done >= min(CASES, 20), f"only {done} cases within {BUDGET_S} s"
    # a refused request's connection closes lingering: closed at once with input unread, the
    # kernel sent a reset that could destroy the answer before the client read it (11 of 150 before)
    assert resets == 0
    assert server.predict("echo", b"still here", timeout=30).json()["text"] == "still here"
    log = server.logs()
    assert "LEAK:" not in log and "Exception" not in log.replace("InvalidKeyException", ""), log[-3000:]
