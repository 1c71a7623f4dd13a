"""Server process contract: the startup banner, bad configuration and busy ports (one clear
error line, non-zero exit), startup models (`load_models=all`), and registering from an http
URL that `allowed_urls` permits (downloaded into the model store, removed on unregister)."""

from __future__ import annotations

import functools
import http.server
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import requests

import harness
from ts import model_server

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


def run_until_exit(tmp_path: Path, config: dict) -> subprocess.CompletedProcess:
    """Start the frontend with a config that must make it exit; return its output."""
    cfg = harness.server_config(tmp_path)
    cfg.update(config)
    path = harness.write_config(tmp_path / "config.properties", cfg)
    cmd = model_server.build_java_command(model_store=tmp_path, ts_config=path, tmp_dir=tmp_path)
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"LOG_LOCATION": str(tmp_path / "logs"), "PATH": "/usr/bin:/bin"})


def test_banner_and_ready_line(tmp_path: Path) -> None:
    with harness.Server(tmp_path) as s:
        out = s.output()
        for line in ("Torchserve version:", f"Inference address: http://127.0.0.1:{s.inference_port}",
                     f"Management address: http://127.0.0.1:{s.management_port}",
                     f"Metrics address: http://127.0.0.1:{s.metrics_port}", "Model Store:"):
            assert line in out
        assert out.index("Inference address") < out.index("Model server started.")


def test_ill_typed_config_is_one_error_line(tmp_path: Path) -> None:
    p = run_until_exit(tmp_path, {"job_queue_size": "lots"})
    assert p.returncode != 0
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1 and "job_queue_size" in errors[0] and "lots" in errors[0]
    assert "Model server started." not in p.stdout


def test_busy_port_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = run_until_exit(tmp_path, {"management_address": f"http://127.0.0.1:{port}"})
    assert p.returncode != 0
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1 and "management_address" in errors[0] and str(port) in errors[0]


def test_load_models_all_at_startup(tmp_path: Path) -> None:
    harness.build_mar(tmp_path, "first", HANDLERS / "echo_handler.py")
    harness.build_mar(tmp_path, "second", HANDLERS / "echo_handler.py", archive_format="tgz")
    with harness.Server(tmp_path, config={"load_models": "all"}) as s:
        listed = requests.get(s.management_url + "/models", timeout=10).json()["models"]
        assert [m["modelName"] for m in listed] == ["first", "second"]
        assert s.predict("second", b"from tgz").json()["text"] == "from tgz"
        assert requests.get(s.management_url + "/models/first", timeout=10).json()[0]["loadedAtStartup"] is True


@pytest.fixture()
def archive_host(tmp_path: Path):
    served = tmp_path / "served"
    served.mkdir()
    harness.build_mar(served, "remote", HANDLERS / "echo_handler.py")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_register_from_an_allowed_url(tmp_path: Path, archive_host: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    # config.properties is a Java properties file: a regex backslash is written twice
    with harness.Server(store, config={"allowed_urls": r"http://127\\.0\\.0\\.1:\\d+/.*"}) as s:
        r = s.register(f"{archive_host}/remote.mar", initial_workers=1)
        assert r.status_code == 200, r.text
        assert (store / "remote.mar").is_file()
        assert s.predict("remote", b"downloaded").json()["text"] == "downloaded"
        r = s.register(f"{archive_host.replace('127.0.0.1', 'localhost')}/remote.mar", model_name="other")
        assert r.status_code == 404 and "allowed" in r.json()["message"]
        assert requests.delete(s.management_url + "/models/remote", timeout=60).status_code == 200
        assert not (store / "remote.mar").exists()
    shutil.rmtree(store)


def test_a_name_registered_from_a_url_is_a_409_from_the_local_archive_too(tmp_path: Path, archive_host: str) -> None:
    """TorchServe 0.12's test_model_archiver: registering, from the model store's .mar (the file the
    URL registration downloaded), a name and version already registered from that URL is a 409."""
    store = tmp_path / "store"
    store.mkdir()
    with harness.Server(store, config={"allowed_urls": r"http://127\\.0\\.0\\.1:\\d+/.*"}) as s:
        assert s.register(f"{archive_host}/remote.mar", model_name="resnet18").status_code == 200
        again = s.register("remote.mar", model_name="resnet18")
        assert again.status_code == 409, again.text
        assert again.json()["type"] == "ConflictStatusException" and again.json()["code"] == 409
        # the refused registration leaves the registered version's archive in place
        assert (store / "remote.mar").is_file()
        assert s.predict("resnet18", b"still served").json()["text"] == "still served"


def test_workers_over_tcp(tmp_path: Path) -> None:
    harness.build_mar(tmp_path, "echo", HANDLERS / "echo_handler.py")
    with harness.Server(tmp_path, config={"worker_socket_type": "tcp"}) as s:
        assert s.register("echo.mar", initial_workers=1).status_code == 200
        assert s.predict("echo", b"over tcp").json()["text"] == "over tcp"
        assert "--sock-type tcp" in s.logs()
