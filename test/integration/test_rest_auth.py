"""Token authorization on the REST APIs: 401 naming the needed key, per-API keys, rotation."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    with harness.Server(store, token_auth=True, models=["echo=echo.mar"]) as s:
        yield s


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_key_file_is_private_and_complete(server: harness.Server) -> None:
    path = server.workdir / "key_file.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    keys = server.keys()
    assert set(keys) == {"management", "inference", "API"}
    assert "expiration time" in keys["management"] and "expiration time" in keys["inference"]


def test_inference_needs_the_inference_key(server: harness.Server) -> None:
    keys = server.keys()
    r = requests.post(server.inference_url + "/predictions/echo", data=b"x", timeout=30)
    assert r.status_code == 401
    assert r.json()["type"] == "InvalidKeyException"
    assert "'inference' key" in r.json()["message"]
    r = requests.post(server.inference_url + "/predictions/echo", data=b"x", headers=bearer(keys["management"]["key"]),
                      timeout=30)
    assert r.status_code == 401
    r = requests.post(server.inference_url + "/predictions/echo", data=b"ok", headers=bearer(keys["inference"]["key"]),
                      timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "ok"
    assert requests.get(server.inference_url + "/ping", timeout=10).status_code == 401
    assert requests.get(server.inference_url + "/ping", headers=bearer(keys["inference"]["key"]), timeout=10).status_code == 200
    assert requests.options(server.inference_url + "/", timeout=10).status_code == 200


def test_management_needs_the_management_key(server: harness.Server) -> None:
    keys = server.keys()
    r = requests.get(server.management_url + "/models", timeout=10)
    assert r.status_code == 401 and "'management' key" in r.json()["message"]
    r = requests.get(server.management_url + "/models", headers=bearer(keys["inference"]["key"]), timeout=10)
    assert r.status_code == 401
    r = requests.get(server.management_url + "/models", headers=bearer(keys["management"]["key"]), timeout=10)
    assert r.status_code == 200
    assert [m["modelName"] for m in r.json()["models"]] == ["echo"]


def test_rotation_needs_the_api_key_and_replaces_the_key(server: harness.Server) -> None:
    keys = server.keys()
    old = keys["inference"]["key"]
    r = requests.post(server.management_url + "/token?type=inference", headers=bearer(keys["management"]["key"]), timeout=10)
    assert r.status_code == 401 and "'API' key" in r.json()["message"]
    r = requests.post(server.management_url + "/token?type=inference", headers=bearer(keys["API"]["key"]), timeout=10)
    assert r.status_code == 200
    new = server.keys()["inference"]["key"]
    assert new != old
    assert requests.get(server.inference_url + "/ping", headers=bearer(old), timeout=10).status_code == 401
    assert requests.get(server.inference_url + "/ping", headers=bearer(new), timeout=10).status_code == 200
    r = requests.post(server.management_url + "/token?type=everything", headers=bearer(keys["API"]["key"]), timeout=10)
    assert r.status_code == 400


def test_auth_off_needs_no_key_and_writes_no_file(tmp_path: Path) -> None:
    with harness.Server(tmp_path, token_auth=False) as s:
        assert requests.get(s.management_url + "/models", timeout=10).status_code == 200
        assert requests.get(s.inference_url + "/ping", timeout=10).status_code == 200
        assert not (s.workdir / "key_file.json").exists()
