"""REST inference API end to end: the real frontend, real Python workers, test handlers.

Covers raw, multipart, form and JSON inputs, headers passed to the handler, batching of
concurrent requests, chunked streaming, handler errors and statuses, every error status of
the inference API (404, 413, 500, 503, 504) and that error responses keep the connection.
"""

from __future__ import annotations

import http.client
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
MAX_REQUEST = 200_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    harness.build_mar(store, "batcher", HANDLERS / "echo_handler.py",
                      config_yaml="batchSize: 4\nmaxBatchDelay: 5000\ndispatchPolicy: delay\n")  # TorchServe's rule
    harness.build_mar(store, "stream", HANDLERS / "stream_handler.py")
    harness.build_mar(store, "tiny", HANDLERS / "echo_handler.py", config_yaml="jobQueueSize: 1\n")
    harness.build_mar(store, "slow", HANDLERS / "echo_handler.py")
    with harness.Server(store, config={"max_request_size": MAX_REQUEST}) as s:
        for name, params in [("echo", {}), ("batcher", {}), ("stream", {}), ("tiny", {}),
                             ("slow", {"response_timeout": 2})]:
            r = s.register(f"{name}.mar", initial_workers=1, **params)
            assert r.status_code == 200, r.text
        yield s


def body(r: requests.Response) -> dict:
    return r.json()


def test_ping_is_healthy(server: harness.Server) -> None:
    r = requests.get(server.inference_url + "/ping", timeout=10)
    assert r.status_code == 200
    assert r.json() == {"status": "Healthy"}


def test_raw_body_and_headers_reach_the_handler(server: harness.Server) -> None:
    r = server.predict("echo", b"hello", headers={"x-custom": "abc"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["text"] == "hello"
    assert out["keys"] == ["body"]
    assert out["x_custom"] == "abc"
    assert out["explain"] == "False"
    assert out["url_path"] == ""
    assert r.headers["x-echo-batch"] == "1"
    assert r.headers["x-request-id"] == out["request_id"]


def test_get_and_version_and_extra_path(server: harness.Server) -> None:
    r = requests.get(server.inference_url + "/predictions/echo/1.0/extra/seg", timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["url_path"] == "extra/seg"
    r = requests.put(server.inference_url + "/predictions/echo", data=b"put", timeout=30)
    assert r.json()["text"] == "put"


def test_explanations_set_the_explain_header(server: harness.Server) -> None:
    r = requests.post(server.inference_url + "/explanations/echo", data=b"why", timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["explain"] == "True"


def test_json_body_is_decoded(server: harness.Server) -> None:
    r = requests.post(server.inference_url + "/predictions/echo", json={"a": 1}, timeout=30)
    assert r.json()["types"] == {"body": "dict"}
    assert json.loads(r.json()["text"]) == {"a": 1}


def test_multipart_parts_become_inputs(server: harness.Server) -> None:
    r = requests.post(server.inference_url + "/predictions/echo",
                      files={"data": ("img.png", b"\x89PNG\r\n", "image/png")},
                      data={"caption": "a cat"}, timeout=30)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["keys"] == ["caption", "data"]
    assert out["types"]["data"] == "bytes"


def test_form_fields_become_inputs(server: harness.Server) -> None:
    r = requests.post(server.inference_url + "/predictions/echo", data={"data": "formtext", "other": "x"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["keys"] == ["data", "other"]
    assert r.json()["text"] == "formtext"


def test_concurrent_requests_form_one_batch(server: harness.Server) -> None:
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: server.predict("batcher", f"req-{i}".encode()), range(4)))
    assert [r.status_code for r in results] == [200] * 4
    assert {r.json()["batch"] for r in results} == {4}
    assert sorted(r.json()["text"] for r in results) == [f"req-{i}" for i in range(4)]
    assert len({r.json()["pid"] for r in results}) == 1


def test_streaming_handler_sends_one_chunk_per_piece(server: harness.Server) -> None:
    with requests.post(server.inference_url + "/predictions/stream", data=b"4", stream=True, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers.get("transfer-encoding") == "chunked"
        chunks = list(r.iter_content(chunk_size=None))
    assert chunks == [b"piece-0;", b"piece-1;", b"piece-2;", b"piece-3;", b"done"]


def test_handler_error_is_500_with_its_message_and_keeps_the_connection(server: harness.Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.inference_port, timeout=30)
    try:
        conn.request("POST", "/predictions/echo", body=b"fail")
        r = conn.getresponse()
        err = json.loads(r.read())
        assert r.status == 500
        assert err["code"] == 500
        assert err["type"] == "InternalServerException"
        assert "echo handler was asked to fail" in err["message"]
        assert r.getheader("connection") == "keep-alive"
        conn.request("POST", "/predictions/nope", body=b"x")
        r = conn.getresponse()
        err = json.loads(r.read())
        assert r.status == 404
        assert err == {"code": 404, "type": "ModelNotFoundException", "message": "Model not found: nope"}
        conn.request("POST", "/predictions/echo", body=b"again")
        r = conn.getresponse()
        assert r.status == 200
        assert json.loads(r.read())["text"] == "again"
    finally:
        conn.close()


def test_handler_status_is_passed_through(server: harness.Server) -> None:
    r = server.predict("echo", b"status:418")
    assert r.status_code == 418


def test_unknown_version_is_404(server: harness.Server) -> None:
    r = server.predict("echo", b"x", version="9.9")
    assert r.status_code == 404
    assert "9.9" in r.json()["message"]


def test_oversized_request_is_413_with_json(server: harness.Server) -> None:
    r = requests.post(server.inference_url + "/predictions/echo", data=b"x" * (MAX_REQUEST + 10), timeout=30)
    assert r.status_code == 413
    assert r.json()["code"] == 413
    assert "max_request_size" in r.json()["message"]


def test_full_queue_is_503(server: harness.Server) -> None:
    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(lambda i: server.predict("tiny", b"sleep:3"), range(5)))
    codes = sorted(r.status_code for r in results)
    assert codes.count(503) >= 1, codes
    assert codes.count(200) >= 1, codes
    assert set(codes) <= {200, 503}
    full = next(r for r in results if r.status_code == 503)
    assert full.json()["type"] == "ServiceUnavailableException"
    assert "queue" in full.json()["message"]


def test_model_without_workers_is_503(server: harness.Server) -> None:
    r = server.register("echo.mar", model_name="idle", initial_workers=0)
    assert r.status_code == 200, r.text
    assert "0 initial workers" in r.json()["status"]
    r = server.predict("idle", b"x")
    assert r.status_code == 503
    assert "has no worker" in r.json()["message"]


def test_response_timeout_is_504_and_the_worker_comes_back(server: harness.Server) -> None:
    before = requests.get(server.management_url + "/models/slow", timeout=10).json()[0]["workers"][0]["pid"]
    r = server.predict("slow", b"sleep:30")
    assert r.status_code == 504, r.text
    assert "responseTimeout" in r.json()["message"]
    r = server.predict("slow", b"after")
    assert r.status_code == 200, r.text
    assert r.json()["pid"] != before


def test_options_root_describes_the_inference_api(server: harness.Server) -> None:
    r = requests.options(server.inference_url + "/", timeout=10)
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    assert "/predictions/{model_name}" in doc["paths"]
    r = requests.get(server.inference_url + "/api-description", timeout=10)
    assert r.json()["paths"] == doc["paths"]


def test_access_log_has_one_line_per_request(server: harness.Server) -> None:
    server.predict("echo", b"logged")
    log = harness.wait_for(lambda: "/predictions/echo" in server.logs("access_log.log") and server.logs("access_log.log"),
                           10, what="access log line")
    line = next(ln for ln in log.splitlines() if '"POST /predictions/echo HTTP/1.1" 200' in ln)
    assert re.search(r' - /127\.0\.0\.1:\d+ "POST /predictions/echo HTTP/1\.1" 200 \d+$', line), line
