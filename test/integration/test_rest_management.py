"""REST management API end to end: register (query and JSON), describe (plain and customized),
list with pagination, versions and set-default, scaling up and down without dropping requests,
unregister answering queued requests, and the management errors (400, 403, 404, 405, 409, 500).
"""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    harness.build_mar(store, "broken", HANDLERS / "broken_handler.py")
    harness.build_mar(store, "yamlcfg", HANDLERS / "echo_handler.py",
                      config_yaml="batchSize: 3\nresponseTimeout: 77\nmaxBatchDelay: 9\nhandler:\n  anything: 1\n")
    harness.build_mar(store, "badyaml", HANDLERS / "echo_handler.py", config_yaml="batchSize: many\n")
    for version in ("1.0", "2.0"):
        out = harness.build_mar(store / f"v{version}", "multi", HANDLERS / "echo_handler.py", version=version)
        shutil.move(str(out), store / f"multi_v{version}.mar")
    return store


@pytest.fixture(scope="module")
def server(store: Path):
    with harness.Server(store) as s:
        yield s


def mgmt(server: harness.Server, method: str, path: str, **kw) -> requests.Response:
    return requests.request(method, server.management_url + path, timeout=kw.pop("timeout", 120), **kw)


def describe(server: harness.Server, name: str, version: str = "") -> list[dict]:
    r = mgmt(server, "GET", f"/models/{name}" + (f"/{version}" if version else ""))
    assert r.status_code == 200, r.text
    return r.json()


def test_register_describe_and_unregister(server: harness.Server) -> None:
    r = server.register("echo.mar", model_name="reg", initial_workers=1, batch_size=2, max_batch_delay=7)
    assert r.status_code == 200, r.text
    assert r.json() == {"status": 'Model "reg" Version: 1.0 registered with 1 initial workers'}
    (d,) = describe(server, "reg")
    assert d["modelName"] == "reg" and d["modelVersion"] == "1.0" and d["modelUrl"] == "echo.mar"
    assert (d["batchSize"], d["maxBatchDelay"], d["minWorkers"], d["maxWorkers"]) == (2, 7, 1, 1)
    assert d["jobQueueStatus"] == {"remainingCapacity": 100, "pendingRequests": 0}
    (w,) = d["workers"]
    assert w["status"] == "READY" and w["pid"] > 0 and w["memoryUsage"] > 0 and w["gpu"] is False
    assert w["startTime"].endswith("Z")
    r = mgmt(server, "DELETE", "/models/reg")
    assert r.status_code == 200
    assert r.json() == {"status": 'Model "reg" unregistered'}
    assert mgmt(server, "GET", "/models/reg").status_code == 404


def test_register_with_a_json_body_and_async(server: harness.Server) -> None:
    r = mgmt(server, "POST", "/models", json={"url": "echo.mar", "model_name": "jsonreg", "initial_workers": 1,
                                              "synchronous": False})
    assert r.status_code == 202, r.text
    assert r.json() == {"status": "Processing worker updates..."}
    harness.wait_for(lambda: describe(server, "jsonreg")[0]["workers"][0]["status"] == "READY", 120,
                     what="async worker to load")
    assert server.predict("jsonreg", b"hi").json()["text"] == "hi"
    assert mgmt(server, "DELETE", "/models/jsonreg").status_code == 200


def test_register_errors(server: harness.Server) -> None:
    r = mgmt(server, "POST", "/models")
    assert r.status_code == 400 and "url" in r.json()["message"]
    r = server.register("missing.mar")
    assert r.status_code == 404 and "missing.mar" in r.json()["message"]
    r = server.register("echo.mar", model_name="bad", batch_size="lots")
    assert r.status_code == 400 and "batch_size" in r.json()["message"]
    r = server.register("../echo.mar")
    assert r.status_code == 404 and "Relative path" in r.json()["message"]
    assert server.register("echo.mar", model_name="dup", initial_workers=0).status_code == 200
    r = server.register("echo.mar", model_name="dup", initial_workers=0)
    assert r.status_code == 409
    assert r.json()["message"] == "Model version 1.0 is already registered for model dup"
    assert mgmt(server, "DELETE", "/models/dup").status_code == 200


def test_settings_priority_properties_then_yaml_then_api(server: harness.Server) -> None:
    r = server.register("yamlcfg.mar", initial_workers=0, batch_size=5)
    assert r.status_code == 200, r.text
    (d,) = describe(server, "yamlcfg")
    # the API's batch_size beats the yaml; the yaml beats config.properties' defaults
    assert (d["batchSize"], d["responseTimeout"], d["maxBatchDelay"], d["startupTimeout"]) == (5, 77, 9, 120)
    assert mgmt(server, "DELETE", "/models/yamlcfg").status_code == 200


def test_ill_typed_model_config_is_a_400_naming_the_key(server: harness.Server) -> None:
    r = server.register("badyaml.mar", initial_workers=0)
    assert r.status_code == 400, r.text
    assert "batchSize" in r.json()["message"] and "integer" in r.json()["message"]
    assert mgmt(server, "GET", "/models/badyaml").status_code == 404


def test_failed_load_reports_the_handlers_error(server: harness.Server) -> None:
    r = server.register("broken.mar", initial_workers=1)
    assert r.status_code == 500, r.text
    msg = r.json()["message"]
    assert "Failed to start workers for model broken" in msg
    assert "weights file missing (intentional)" in msg
    assert mgmt(server, "GET", "/models/broken").status_code == 404
    assert "weights file missing (intentional)" in server.logs()


def test_customized_describe_asks_the_handler(server: harness.Server) -> None:
    assert server.register("echo.mar", model_name="custom", initial_workers=1).status_code == 200
    r = mgmt(server, "GET", "/models/custom?customized=true")
    assert r.status_code == 200, r.text
    meta = r.json()[0]["customizedMetadata"]
    assert meta["handler"] == "echo" and meta["model"] == "custom"
    assert meta["pid"] == r.json()[0]["workers"][0]["pid"]
    # the worker's live stages come from its PONG, which the thread delivering the handler's
    # answer would have to read itself if the describe ran there (it gave up after 2 s, without them)
    assert "stages" in r.json()[0]["workers"][0], r.json()[0]["workers"][0]
    assert mgmt(server, "DELETE", "/models/custom").status_code == 200


def test_list_is_sorted_and_paginated(server: harness.Server) -> None:
    names = [f"page{i}" for i in range(5)]
    for n in names:
        assert server.register("echo.mar", model_name=n, initial_workers=0).status_code == 200
    try:
        seen: list[str] = []
        token = "0"
        pages = 0
        while token is not None:
            r = mgmt(server, "GET", f"/models?limit=2&next_page_token={token}")
            assert r.status_code == 200
            page = r.json()
            assert len(page["models"]) <= 2
            seen += [m["modelName"] for m in page["models"]]
            token = page.get("nextPageToken")
            pages += 1
        assert seen == sorted(seen)
        assert [n for n in seen if n.startswith("page")] == names
        assert pages >= 3
        assert all(m["modelUrl"] == "echo.mar" for m in mgmt(server, "GET", "/models").json()["models"]
                   if m["modelName"].startswith("page"))
    finally:
        for n in names:
            mgmt(server, "DELETE", f"/models/{n}")


def test_versions_and_set_default(server: harness.Server) -> None:
    assert server.register("multi_v1.0.mar", initial_workers=1).status_code == 200
    assert server.register("multi_v2.0.mar", initial_workers=1).status_code == 200
    assert [d["modelVersion"] for d in describe(server, "multi", "all")] == ["1.0", "2.0"]
    assert describe(server, "multi")[0]["modelVersion"] == "1.0"
    assert server.predict("multi", b"x").json()["version"] == "1.0"
    assert server.predict("multi", b"x", version="2.0").json()["version"] == "2.0"
    r = mgmt(server, "PUT", "/models/multi/2.0/set-default")
    assert r.status_code == 200
    assert r.json() == {"status": 'Default version successfully updated for model "multi" to "2.0"'}
    assert server.predict("multi", b"x").json()["version"] == "2.0"
    assert mgmt(server, "PUT", "/models/multi/3.0/set-default").status_code == 404
    r = mgmt(server, "DELETE", "/models/multi/2.0")
    assert r.status_code == 403 and "default version" in r.json()["message"]
    assert mgmt(server, "DELETE", "/models/multi/1.0").status_code == 200
    assert [d["modelVersion"] for d in describe(server, "multi", "all")] == ["2.0"]
    assert mgmt(server, "DELETE", "/models/multi").status_code == 200


def test_scale_up_and_down_without_dropping_requests(server: harness.Server) -> None:
    assert server.register("echo.mar", model_name="scaled", initial_workers=1).status_code == 200
    r = mgmt(server, "PUT", "/models/scaled?min_worker=2&synchronous=true")
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "Workers scaled to 2 for model: scaled"}
    workers = describe(server, "scaled")[0]["workers"]
    assert [w["status"] for w in workers] == ["READY", "READY"]
    assert len({w["pid"] for w in workers}) == 2
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(server.predict, "scaled", b"sleep:1") for _ in range(4)]
        harness.wait_for(lambda: describe(server, "scaled")[0]["jobQueueStatus"]["pendingRequests"] >= 1
                         or all(f.done() for f in futures), 30, what="requests to queue")
        r = mgmt(server, "PUT", "/models/scaled?min_worker=1&max_worker=1&synchronous=true")
        assert r.status_code == 200, r.text
        codes = [f.result().status_code for f in futures]
    assert codes == [200] * 4
    assert len(describe(server, "scaled")[0]["workers"]) == 1
    assert server.predict("scaled", b"after").status_code == 200
    r = mgmt(server, "PUT", "/models/scaled?min_worker=3&max_worker=1")
    assert r.status_code == 400 and "max_worker" in r.json()["message"]
    assert mgmt(server, "PUT", "/models/nope?min_worker=1").status_code == 404
    assert mgmt(server, "DELETE", "/models/scaled").status_code == 200


def test_scale_to_zero_answers_queued_requests(server: harness.Server) -> None:
    assert server.register("echo.mar", model_name="zero", initial_workers=1).status_code == 200
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(server.predict, "zero", b"sleep:2") for _ in range(3)]
        harness.wait_for(lambda: describe(server, "zero")[0]["jobQueueStatus"]["pendingRequests"] >= 2, 30,
                         what="requests to queue")
        assert mgmt(server, "PUT", "/models/zero?min_worker=0&max_worker=0&synchronous=true").status_code == 200
        results = [f.result() for f in futures]
    assert sorted(r.status_code for r in results) == [200, 503, 503]
    assert all("scaled to 0 workers" in r.json()["message"] for r in results if r.status_code == 503)
    assert mgmt(server, "DELETE", "/models/zero").status_code == 200


def test_unregister_answers_queued_requests(server: harness.Server) -> None:
    assert server.register("echo.mar", model_name="drained", initial_workers=1).status_code == 200
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(server.predict, "drained", b"sleep:2") for _ in range(4)]
        harness.wait_for(lambda: describe(server, "drained")[0]["jobQueueStatus"]["pendingRequests"] >= 3, 30,
                         what="requests to queue")
        r = mgmt(server, "DELETE", "/models/drained")
        assert r.status_code == 200
        results = [f.result() for f in futures]
    assert sorted(r.status_code for r in results) == [200, 503, 503, 503]
    assert all("unregistered" in r.json()["message"] for r in results if r.status_code == 503)
    assert time.monotonic() - started < 60
    assert server.predict("drained", b"x").status_code == 404


def test_a_model_named_tokenizer_can_be_managed(server: harness.Server) -> None:
    assert server.register("echo.mar", model_name="tokenizer", initial_workers=0).status_code == 200
    assert describe(server, "tokenizer")[0]["modelName"] == "tokenizer"
    assert mgmt(server, "PUT", "/models/tokenizer?min_worker=0").status_code == 202
    assert mgmt(server, "DELETE", "/models/tokenizer").status_code == 200


def test_options_describes_the_management_api(server: harness.Server) -> None:
    doc = requests.options(server.management_url + "/", timeout=10).json()
    assert "/models" in doc["paths"] and "post" in doc["paths"]["/models"]


def test_model_api_disabled_refuses_register_and_unregister(store: Path) -> None:
    with harness.Server(store, model_api=False, models=["locked=echo.mar"]) as s:
        # TorchServe's body, word for word (its test_model_control_mode compares it)
        torchserve_405 = {"code": 405, "type": "MethodNotAllowedException",
                          "message": "Requested method is not allowed, please refer to API document."}
        r = requests.post(s.management_url + "/models?url=echo.mar", timeout=30)
        assert (r.status_code, r.json()) == (405, torchserve_405)
        r = requests.delete(s.management_url + "/models/locked", timeout=30)
        assert (r.status_code, r.json()) == (405, torchserve_405)
        d = requests.get(s.management_url + "/models/locked", timeout=30).json()[0]
        assert d["loadedAtStartup"] is True
        r = requests.put(s.management_url + "/models/locked?min_worker=0&max_worker=0&synchronous=true", timeout=60)
        assert r.status_code == 200, r.text
