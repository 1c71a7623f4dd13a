"""Dispatch policy end to end (docs/batching.md): model-config.yaml key, registration parameter
(which wins), describe field, the error for a bad value, and a lone request that does not wait
out a long maxBatchDelay under the default policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
# Long enough that a request held for the delay would run into the client timeout below.
LONG_DELAY_MS = 120_000


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    harness.build_mar(store, "yamldelay", HANDLERS / "echo_handler.py",
                      config_yaml="batchSize: 4\nmaxBatchDelay: 7\ndispatchPolicy: delay\n")
    harness.build_mar(store, "yamlbad", HANDLERS / "echo_handler.py",
                      config_yaml="batchSize: 4\ndispatchPolicy: sometimes\n")
    return store


@pytest.fixture(scope="module")
def server(store: Path):
    with harness.Server(store) as s:
        yield s


def register(server: harness.Server, query: str) -> requests.Response:
    return requests.post(f"{server.management_url}/models?{query}&initial_workers=1&synchronous=true",
                         timeout=180)


def describe(server: harness.Server, name: str) -> dict:
    r = requests.get(f"{server.management_url}/models/{name}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()[0]


def test_default_policy_sends_a_lone_request_without_waiting_the_delay(server: harness.Server) -> None:
    r = register(server, f"url=echo.mar&model_name=lone&batch_size=8&max_batch_delay={LONG_DELAY_MS}")
    assert r.status_code == 200, r.text
    assert describe(server, "lone")["dispatchPolicy"] == "adaptive"
    # Under TorchServe's rule this request would be held for 120 s; the client gives up at 30 s.
    p = requests.post(f"{server.inference_url}/predictions/lone", data=b"hello", timeout=30)
    assert p.status_code == 200, p.text
    assert (p.json()["text"], p.json()["batch"]) == ("hello", 1)


def test_yaml_key_and_registration_parameter(server: harness.Server) -> None:
    assert register(server, "url=yamldelay.mar&model_name=fromyaml").status_code == 200
    d = describe(server, "fromyaml")
    assert (d["batchSize"], d["maxBatchDelay"], d["dispatchPolicy"]) == (4, 7, "delay")
    r = register(server, "url=yamldelay.mar&model_name=fromapi&dispatch_policy=eager")
    assert r.status_code == 200, r.text
    assert describe(server, "fromapi")["dispatchPolicy"] == "eager"
    # delay still answers (after at most maxBatchDelay)
    p = requests.post(f"{server.inference_url}/predictions/fromyaml", data=b"x", timeout=30)
    assert p.status_code == 200, p.text
    assert p.json()["text"] == "x"


def test_bad_policy_is_refused_naming_the_choices(server: harness.Server) -> None:
    r = register(server, "url=echo.mar&model_name=badapi&dispatch_policy=soon")
    assert r.status_code == 400
    assert "'dispatchPolicy' must be eager, adaptive or delay, got soon" in r.json()["message"]
    r = register(server, "url=yamlbad.mar&model_name=badyaml")
    assert r.status_code == 400, r.text
    assert "model-config.yaml" in r.json()["message"] and "dispatchPolicy" in r.json()["message"]
