"""The compatibility switch (`compatibility=torchserve-0.12`): every deliberate difference answers as
TorchServe 0.12 does, and without it as tserve does. One server of each kind, token auth on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from queue import Empty, Queue

import pytest
import requests

import harness
from ts import model_server

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
TORCHSERVE_KEY_MESSAGE = "Token Authorization failed. Token either incorrect, expired, or not provided correctly"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    return store


@pytest.fixture(scope="module", params=["torchserve-0.12", "tserve"])
def server(request: pytest.FixtureRequest, store: Path):
    config = {"compatibility": request.param} if request.param != "tserve" else {}
    with harness.Server(store, config, token_auth=True) as s:
        s.compat = request.param == "torchserve-0.12"  # type: ignore[attr-defined]
        key = s.keys()["management"]["key"]
        r = requests.post(f"{s.management_url}/models", params={"url": "echo.mar", "model_name": "slow",
                          "response_timeout": 2, "synchronous": "true"},
                          headers={"Authorization": f"Bearer {key}"}, timeout=120)
        assert r.status_code == 200, r.text
        yield s


def bearer(server: harness.Server, api: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.keys()[api]['key']}"}


def test_a_bad_key(server: harness.Server) -> None:
    r = requests.get(server.management_url + "/models", headers={"Authorization": "Bearer wrong"}, timeout=10)
    if server.compat:
        assert (r.status_code, r.json()["message"]) == (400, TORCHSERVE_KEY_MESSAGE)
    else:
        assert r.status_code == 401 and "management" in r.json()["message"]
    assert r.json()["type"] == "InvalidKeyException"


def test_a_boolean_other_than_true_or_false(server: harness.Server) -> None:
    r = requests.put(server.management_url + "/models/slow", params={"min_worker": 1, "synchronous": "2"},
                     headers=bearer(server, "management"), timeout=60)
    if server.compat:
        assert r.status_code == 202, r.text   # TorchServe: "2" is false, the scale is asynchronous
    else:
        assert r.status_code == 400 and "synchronous" in r.json()["message"]


def test_a_response_timeout(server: harness.Server) -> None:
    r = server.predict("slow", b"sleep:30", headers=bearer(server, "inference"))
    if server.compat:
        assert (r.status_code, r.json()["message"]) == (500, "Worker died."), r.text
    else:
        assert r.status_code == 504 and "responseTimeout" in r.json()["message"], r.text


def test_a_response_timeout_logs_as_torchserve_under_the_switch(server: harness.Server) -> None:
    # TorchServe's lines that scripts (and its own tests) read from the log after a response timeout
    assert server.predict("slow", b"sleep:30", headers=bearer(server, "inference")).status_code in (500, 504)
    assert server.predict("slow", b"again", headers=bearer(server, "inference"), timeout=120).status_code == 200
    harness.wait_for(lambda: "Auto recovery succeeded, reset recoveryStartTS" in server.logs(), 60,
                     what="the recovery line (either way)")
    logs = server.logs()
    torchserve_lines = [re.search(r"Number or consecutive unsuccessful inference \d+", logs),
                        "Backend worker error" in logs or None,
                        "WorkerInitializationException: Backend worker did not respond in given time" in logs or None,
                        "Worker disconnected. WORKER_MODEL_LOADED" in logs or None]
    if server.compat:
        assert all(torchserve_lines), logs[-3000:]
        assert "did not answer within its responseTimeout" not in logs
    else:
        assert not any(torchserve_lines), logs[-3000:]
        assert "did not answer within its responseTimeout" in logs


def test_a_failed_load_repeats_no_worker_output_under_the_switch(server: harness.Server, store: Path) -> None:
    # a script reading a worker's traceback up to its last line must not find it again in the
    # frontend's lines (TorchServe's test_handler_traceback_logging reads four attempts that way)
    harness.build_mar(store, "broken", HANDLERS / "broken_handler.py")
    # registered without waiting: the model stays registered and its worker retries (a synchronous
    # registration that fails unregisters it, racing the worker's retry line)
    r = requests.post(f"{server.management_url}/models", params={"url": "broken.mar", "synchronous": "false"},
                      headers=bearer(server, "management"), timeout=120)
    assert r.status_code == 202, r.text
    harness.wait_for(lambda: re.search(r"broken\S* WorkerThread .*Retry worker", server.logs()), 30, what="a retry")
    frontend = [line for line in server.logs().splitlines()
                if "W-" in line and "broken" in line and "MODEL_LOG" not in line]
    echoing = [line for line in frontend if "weights file missing" in line]
    if server.compat:
        assert not echoing, echoing
        assert any("Load model failed: broken, error: Worker died." in line for line in frontend), frontend
        assert any(line.endswith("seconds.") for line in frontend if "Retry worker" in line), frontend
    else:
        assert echoing, frontend
    requests.delete(f"{server.management_url}/models/broken", headers=bearer(server, "management"), timeout=60)


def _lines(stream) -> Queue:
    q: Queue = Queue()
    threading.Thread(target=lambda: [q.put(line) for line in stream] and None, daemon=True).start()
    return q


def _until(q: Queue, needle: str, timeout: float) -> list[str]:
    seen: list[str] = []
    try:
        while not any(needle in line for line in seen):
            seen.append(q.get(timeout=timeout))
    except Empty:
        raise AssertionError(f"no line with {needle!r} within {timeout} s; got: {''.join(seen[-20:])}") from None
    return seen


@pytest.mark.parametrize("compat", [True, False])
def test_the_launcher_streams_the_log_to_its_stdout_only_under_the_switch(tmp_path: Path, store: Path, compat: bool) -> None:
    config = harness.server_config(store)
    if compat:
        config["compatibility"] = "torchserve-0.12"
    path = harness.write_config(tmp_path / "config.properties", config)
    env = {**os.environ, "TMPDIR": str(tmp_path), "LOG_LOCATION": str(tmp_path / "logs")}
    env.pop("TS_CONFIG_FILE", None)
    cmd = [sys.executable, "-m", "ts.model_server"]
    launcher = subprocess.Popen([*cmd, "--start", "--ts-config", str(path), "--ncs"], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = _lines(launcher.stdout)
        _until(out, model_server.READY_LINE, 120)
        assert launcher.wait(timeout=30) == 0, "the launcher returns once the server is up, as TorchServe's"
        r = requests.post(f"{config['management_address']}/models", params={"url": "echo.mar", "synchronous": "true"},
                          timeout=120)
        assert r.status_code == 200, r.text
        if compat:   # the workers' lines reach the launcher's stdout, as TorchServe's do
            _until(out, "echo_1.0", 60)
        else:
            with pytest.raises(Empty):
                out.get(timeout=1)
    finally:
        subprocess.run([*cmd, "--stop"], env=env, cwd=tmp_path, capture_output=True, timeout=120)
        launcher.stdout.close()
