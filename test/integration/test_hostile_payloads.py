"""Worker-killing payloads and clean stops (issue 27, items 1, 7, 8, 10; figures in docs/reliability.md).

A JSON body nested past Python's recursion limit, manifest versions that would forge log lines,
a handler whose children ignore SIGTERM, and a TMPDIR too long for AF_UNIX socket paths. Every
probe ends with the server still answering.
"""

from __future__ import annotations

import json
import os
import signal
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

import harness
from ts.utils import process_tree

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
DEEP = b"[" * 1000 + b"]" * 1000  # 2 KB: json.loads raises RecursionError at this depth


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile27")
    harness.build_mar(root, "echo", HANDLERS / "echo_handler.py")
    harness.build_mar(root, "spawner", HANDLERS / "spawner_handler.py")
    return root


@pytest.fixture(scope="module")
def server(store: Path):
    with harness.Server(store, config={"default_workers_per_model": 1}) as s:
        r = s.register("echo.mar", batch_size="4", max_batch_delay="2000", initial_workers="1")
        assert r.status_code == 200, r.text
        yield s


def worker_pid(server: harness.Server) -> int:
    return int(server.predict("echo", b"pid", timeout=30).json()["pid"])


def test_deeply_nested_json_body_does_not_kill_the_worker(server: harness.Server) -> None:
    before = worker_pid(server)
    bodies = [DEEP, b'{"a": 1}', b"plain", DEEP]
    with ThreadPoolExecutor(len(bodies)) as pool:  # one batch: the deep bodies must not fail the others
        answers = list(pool.map(lambda b: server.predict("echo", b, timeout=30,
                                                         headers={"Content-Type": "application/json"}), bodies))
    assert [r.status_code for r in answers] == [200, 200, 200, 200], [r.text[:200] for r in answers]
    # as for JSON that does not parse, the handler gets the bytes (TorchServe's answer is 200 too)
    assert answers[0].json()["text"] == DEEP.decode() and answers[0].json()["types"]["body"] == "bytes"
    assert answers[1].json()["types"]["body"] == "dict"
    assert requests.get(server.inference_url + "/ping", timeout=10).status_code == 200
    assert worker_pid(server) == before


def forged_archive(store: Path, name: str, version: str) -> str:
    """echo.mar with another name and a manifest modelVersion the archiver would not write."""
    target = store / f"{name}.mar"
    with zipfile.ZipFile(store / "echo.mar") as src, zipfile.ZipFile(target, "w") as out:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "MAR-INF/MANIFEST.json":
                manifest = json.loads(data)
                manifest["model"].update(modelName=name, modelVersion=version)
                data = json.dumps(manifest).encode()
            out.writestr(item, data)
    return target.name


@pytest.mark.parametrize("version", ["1\nFORGED [INFO] admin logged in", "1\r\nFORGED", "../../x", "1/../..",
                                     "1\x1b[2J", "9" * 100_000])
def test_forged_manifest_versions_are_refused(server: harness.Server, store: Path, version: str) -> None:
    r = server.register(forged_archive(store, "forged", version))
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    assert "Invalid model version" in message and "modelVersion" in message
    assert len(message) < 1000 and "\n" not in message
    for log in ("ts_log.log", "model_log.log"):
        assert not [line for line in server.logs(log).splitlines() if line.startswith("FORGED")]
    assert not [line for line in server.output().splitlines() if line.startswith("FORGED")]
    assert requests.get(server.management_url + "/models/forged", timeout=10).status_code == 404


def alive_pids(pids: list[int]) -> list[int]:
    return [p for p in pids if process_tree.process_alive(p)]  # a zombie is gone


def reap(pids: list[int]) -> None:
    for pid in pids:  # the test's own handler started them: end them if the server did not
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_gone(pids: list[int], what: str) -> None:
    try:
        harness.wait_for(lambda: not alive_pids(pids), 15, interval=0.1, what=what)
    finally:
        reap(pids)


def test_handler_children_end_with_an_unregistered_worker(server: harness.Server) -> None:
    r = server.register("spawner.mar", initial_workers="1")
    assert r.status_code == 200, r.text
    children = server.predict("spawner", b"x", timeout=30).json()["children"]
    assert len(alive_pids(children)) == 2
    r = requests.delete(server.management_url + "/models/spawner", timeout=60)
    assert r.status_code == 200, r.text
    wait_gone(children, "the stopped worker's children (one ignores SIGTERM in a clean environment) to end")


def test_a_long_tmpdir_still_starts_workers_and_stop_ends_their_children(store: Path, tmp_path: Path) -> None:
    # <workdir>/tmp is the server's TMPDIR: 120 characters, so <TMPDIR>/tserve-<pid>/.ts.sock.<port> cannot fit
    workdir = tmp_path / ("w" * max(1, 120 - len(str(tmp_path)) - 5))
    with harness.Server(store, config={"default_workers_per_model": 1}, workdir=workdir) as s:
        assert len(str(s.tmp_dir)) >= 110
        for name in ("echo.mar", "spawner.mar"):
            r = s.register(name, timeout=60)
            assert r.status_code == 200, r.text
        assert s.predict("echo", b"hi", timeout=30).json()["text"] == "hi"
        children = s.predict("spawner", b"x", timeout=30).json()["children"]
        assert s.proc is not None
        s.proc.send_signal(signal.SIGTERM)  # what `torchserve --stop` sends first
        s.proc.wait(60)
        wait_gone(children, "the children of the stopped server's worker to end")
    assert not list(Path("/tmp").glob(f"tserve-{s.pid}"))  # the short socket folder is removed too
