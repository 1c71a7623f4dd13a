"""The `torchserve` command as a user runs it: start, already running, stop, and its errors."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

import harness
from ts import model_server

pytestmark = pytest.mark.slow


def torchserve_cmd() -> list[str]:
    script = Path(sys.executable).parent / "torchserve"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ts.model_server"]


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """A private TMPDIR (pid file, sockets) and log dir, so the test never meets another server."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "LOG_LOCATION": str(tmp_path / "logs")}
    env.pop("TS_CONFIG_FILE", None)
    return env


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(torchserve_cmd() + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_start_already_running_stop(tmp_path: Path, cli_env: dict[str, str]) -> None:
    store = tmp_path / "store"
    store.mkdir()
    config = harness.write_config(tmp_path / "config.properties", harness.server_config(store))
    started = run_cli(["--start", "--ts-config", str(config), "--model-store", str(store), "--ncs"], cli_env, tmp_path)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert model_server.READY_LINE in started.stdout
        pid = int((Path(cli_env["TMPDIR"]) / ".model_server.pid").read_text())
        inference = _address(config, "inference_address")
        assert requests.get(f"{inference}/ping", timeout=10).json()["status"] == "Healthy"

        again = run_cli(["--start", "--ts-config", str(config), "--model-store", str(store)], cli_env, tmp_path)
        assert again.returncode == 1
        assert "TorchServe is already running, please use torchserve --stop to stop TorchServe." in again.stdout
    finally:
        stopped = run_cli(["--stop"], cli_env, tmp_path)
    assert stopped.returncode == 0
    assert "TorchServe has stopped." in stopped.stdout
    harness.wait_for(lambda: not harness.alive(pid), 10, what="frontend exit")
    assert not (Path(cli_env["TMPDIR"]) / ".model_server.pid").exists()


def _address(config: Path, key: str) -> str:
    return model_server.read_properties(config)[key]


def test_start_fails_clearly_when_port_is_taken(tmp_path: Path, cli_env: dict[str, str]) -> None:
    store = tmp_path / "store"
    store.mkdir()
    config = harness.server_config(store)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        config["inference_address"] = f"http://127.0.0.1:{busy.getsockname()[1]}"
        path = harness.write_config(tmp_path / "config.properties", config)
        result = run_cli(["--start", "--ts-config", str(path), "--model-store", str(store)], cli_env, tmp_path)
    assert result.returncode == 1
    assert "TorchServe failed to start" in result.stderr
    assert not (Path(cli_env["TMPDIR"]) / ".model_server.pid").exists()


def test_stop_when_not_running(tmp_path: Path, cli_env: dict[str, str]) -> None:
    result = run_cli(["--stop"], cli_env, tmp_path)
    assert result.returncode == 0
    assert "TorchServe is not currently running." in result.stdout


def test_missing_java_names_the_package(tmp_path: Path, cli_env: dict[str, str]) -> None:
    store = tmp_path / "store"
    store.mkdir()
    python_dir = tmp_path / "bin"
    python_dir.mkdir()
    (python_dir / "python").symlink_to(sys.executable)
    env = {**cli_env, "PATH": str(python_dir)}
    env.pop("JAVA_HOME", None)
    result = subprocess.run(
        [sys.executable, "-m", "ts.model_server", "--start", "--model-store", str(store)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "Java was not found" in result.stderr
    assert "openjdk-17-jre-headless" in result.stderr


def test_bad_java_home(tmp_path: Path, cli_env: dict[str, str]) -> None:
    store = tmp_path / "store"
    store.mkdir()
    result = run_cli(["--start", "--model-store", str(store)], {**cli_env, "JAVA_HOME": str(tmp_path / "nojava")}, tmp_path)
    assert result.returncode == 1
    assert "JAVA_HOME is set to" in result.stderr


@pytest.mark.parametrize("value", ["=x.mar", "bad name=x.mar", "name="])
def test_bad_models_value(tmp_path: Path, cli_env: dict[str, str], value: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    result = run_cli(["--start", "--model-store", str(store), "--models", value], cli_env, tmp_path)
    assert result.returncode == 1
    assert f"Invalid --models value '{value}'" in result.stderr


def test_model_store_missing(tmp_path: Path, cli_env: dict[str, str]) -> None:
    result = run_cli(["--start", "--model-store", str(tmp_path / "nope")], cli_env, tmp_path)
    assert result.returncode == 1
    assert "directory not found" in result.stderr
    result = run_cli(["--start"], cli_env, tmp_path)
    assert result.returncode == 1
    assert "Missing --model-store" in result.stderr


def test_workflow_store_missing(tmp_path: Path, cli_env: dict[str, str]) -> None:
    result = run_cli(["--start", "--model-store", str(tmp_path), "--workflow-store", str(tmp_path / "nope")], cli_env, tmp_path)
    assert result.returncode == 1
    assert "--workflow-store" in result.stderr and "directory not found" in result.stderr


def test_version(tmp_path: Path, cli_env: dict[str, str]) -> None:
    result = run_cli(["--version"], cli_env, tmp_path)
    assert result.returncode == 0
    assert model_server.ts.__version__ in result.stdout


def test_java_found_on_path_and_java_home() -> None:
    java = shutil.which("java")
    assert java is not None, "the test machine needs Java (make install)"
    assert model_server.find_java() in {java, str(Path(os.environ.get("JAVA_HOME", "/x")) / "bin" / "java")}


def test_stop_deletes_key_file(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """As TorchServe's --stop: the token file the server wrote does not outlive it."""
    store = tmp_path / "store"
    store.mkdir()
    config = harness.write_config(tmp_path / "config.properties", harness.server_config(store, token_auth=True))
    started = run_cli(["--start", "--ts-config", str(config), "--ncs"], cli_env, tmp_path)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert (tmp_path / "key_file.json").is_file()
    finally:
        stopped = run_cli(["--stop"], cli_env, tmp_path)
    assert "TorchServe has stopped." in stopped.stdout
    assert not (tmp_path / "key_file.json").exists()
