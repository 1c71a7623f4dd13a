"""Config snapshots as TorchServe writes them (logs/config/<timestamp>-<type>.cfg after each
management change), restored by a server started without --ts-config; -ncs writes none; a
corrupt latest snapshot stops the start with an error naming it and the key."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
SNAPSHOT_NAME = re.compile(r"^\d{17}-(startup|snapshot|shutdown)\.cfg$")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """echo.mar (version 1.0) and echo_v2.mar (version 2.0 of the same model)."""
    store = tmp_path_factory.mktemp("snapshot-store")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py", version="1.0")
    staging = tmp_path_factory.mktemp("snapshot-v2")
    harness.build_mar(staging, "echo", HANDLERS / "echo_handler.py", version="2.0").rename(store / "echo_v2.mar")
    return store


def snapshots(workdir: Path) -> list[Path]:
    folder = workdir / "logs" / "config"
    return sorted(p for p in folder.iterdir() if SNAPSHOT_NAME.match(p.name)) if folder.is_dir() else []


def model_snapshot(path: Path) -> dict:
    props = dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return json.loads(props["model_snapshot"].replace("\\:", ":").replace("\\=", "="))


def describe(server: harness.Server) -> dict[str, dict]:
    r = requests.get(f"{server.management_url}/models/echo/all", timeout=30)
    assert r.status_code == 200, r.text
    return {d["modelVersion"]: d for d in r.json()}


def manage(server: harness.Server, store: Path) -> None:
    """Two versions with their own batching and timeout, version 2.0 scaled and made the default."""
    r = server.register("echo.mar", initial_workers=1, batch_size=2, max_batch_delay=40, response_timeout=31)
    assert r.status_code == 200, r.text
    r = server.register("echo_v2.mar", initial_workers=1, batch_size=4, max_batch_delay=50, response_timeout=33)
    assert r.status_code == 200, r.text
    r = requests.put(f"{server.management_url}/models/echo/2.0", params={"min_worker": 2, "max_worker": 3,
                                                                         "synchronous": "true"}, timeout=120)
    assert r.status_code == 200, r.text
    r = requests.put(f"{server.management_url}/models/echo/2.0/set-default", timeout=30)
    assert r.status_code == 200, r.text


def latest_with(workdir: Path, predicate) -> dict | None:
    files = snapshots(workdir)
    return model_snapshot(files[-1]) if files and predicate(model_snapshot(files[-1])) else None


def test_restart_without_ts_config_restores_models_versions_default_and_scale(store: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "server"
    first = harness.Server(store, workdir=workdir, config={"default_workers_per_model": 1})
    with first:
        assert [p.name.split("-", 1)[1] for p in snapshots(workdir)] == ["startup.cfg"]
        manage(first, store)
        # written after each change by a background thread: wait for the one with the default moved
        snap = harness.wait_for(lambda: latest_with(workdir, lambda s: s["models"]["echo"]["2.0"]["defaultVersion"]),
                                30, interval=0.1, what="a snapshot with version 2.0 as the default")
    assert snap["modelCount"] == 2
    assert snap["models"]["echo"]["1.0"] == {
        "defaultVersion": False, "marName": "echo.mar", "minWorkers": 1, "maxWorkers": 1, "batchSize": 2,
        "maxBatchDelay": 40, "responseTimeout": 31, "startupTimeout": 120, "runtimeType": "python"}
    assert snap["models"]["echo"]["2.0"] == {
        "defaultVersion": True, "marName": "echo_v2.mar", "minWorkers": 2, "maxWorkers": 3, "batchSize": 4,
        "maxBatchDelay": 50, "responseTimeout": 33, "startupTimeout": 120, "runtimeType": "python"}
    kinds = [p.name.split("-", 1)[1] for p in snapshots(workdir)]
    assert kinds[0] == "startup.cfg" and kinds[-1] == "shutdown.cfg" and "snapshot.cfg" in kinds
    assert model_snapshot(snapshots(workdir)[-1])["models"] == snap["models"]
    assert (snapshots(workdir)[-1].stat().st_mode & 0o777) == 0o600
    assert not list((workdir / "logs" / "config").glob("*.tmp")) and not list((workdir / "logs" / "config").glob(".*"))

    # the same work directory, no --ts-config: the latest snapshot wins over ./config.properties
    second = harness.Server(store, workdir=workdir, use_ts_config=False)
    second.config = first.config   # the same ports, which the snapshot holds
    second.inference_port, second.management_port = first.inference_port, first.management_port
    with second:
        assert "Restoring 2 model versions from model_snapshot of config snapshot" in second.logs()
        d = describe(second)
        default = requests.get(f"{second.management_url}/models/echo", timeout=30).json()
        assert [m["modelVersion"] for m in default] == ["2.0"]
        assert (d["2.0"]["minWorkers"], d["2.0"]["maxWorkers"], d["2.0"]["batchSize"], d["2.0"]["maxBatchDelay"],
                d["2.0"]["responseTimeout"]) == (2, 3, 4, 50, 33)
        assert (d["1.0"]["minWorkers"], d["1.0"]["batchSize"], d["1.0"]["maxBatchDelay"], d["1.0"]["responseTimeout"]) == (
            1, 2, 40, 31)
        assert [w["status"] for w in d["2.0"]["workers"]] == ["READY", "READY"]
        r = second.predict("echo", b"hello", headers={"Content-Type": "text/plain"})
        assert r.status_code == 200 and r.json()["text"] == "hello"
        assert requests.get(f"{second.inference_url}/v2/health/ready", timeout=10).status_code == 200

    # a corrupt snapshot, newer than the others: a clear error naming it and the key, no start
    bad = workdir / "logs" / "config" / "99991231235959999-snapshot.cfg"
    bad.write_text('model_snapshot={"models": {"echo": {"1.0": {"marName": "echo.mar", "minWorkers": "two"}}}}\n')
    broken = harness.Server(store, workdir=workdir, use_ts_config=False)
    with pytest.raises(RuntimeError) as err:
        broken.start()
    message = str(err.value)
    assert str(bad) in message and "model_snapshot" in message and "models.echo.1.0.minWorkers" in message
    assert "--ts-config" in message and "Traceback" not in message
    # --ts-config wins over snapshots: that start works and restores nothing
    with harness.Server(store, workdir=workdir) as third:
        r = requests.get(f"{third.management_url}/models", timeout=10)
        assert r.json()["models"] == []


def test_ncs_writes_no_snapshots(store: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "ncs"
    with harness.Server(store, workdir=workdir, no_config_snapshots=True) as s:
        assert s.register("echo.mar", initial_workers=1).status_code == 200
        assert requests.put(f"{s.management_url}/models/echo", params={"min_worker": 0, "synchronous": "true"},
                            timeout=60).status_code == 200
    assert not (workdir / "logs" / "config").exists()


def test_snapshots_are_bounded(store: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "bounded"
    with harness.Server(store, workdir=workdir, config={"max_config_snapshots": 3}) as s:
        assert s.register("echo.mar", initial_workers=0).status_code == 200
        for n in (1, 2, 1, 2):
            r = requests.put(f"{s.management_url}/models/echo", params={"min_worker": 0, "max_worker": n}, timeout=60)
            assert r.status_code in (200, 202), r.text
        # snapshots are written after the answer, and the writer prunes right after the rename: wait for
        # both (until then the latest may still be the startup snapshot, without the model)
        harness.wait_for(lambda: latest_with(workdir, lambda m: m["models"].get("echo", {}).get("1.0", {}).get("maxWorkers") == 2)
                         and len(snapshots(workdir)) == 3, 30, interval=0.1,
                         what="the snapshot of the last scale, the older ones pruned to 3")
    assert len(snapshots(workdir)) == 3 and snapshots(workdir)[-1].name.endswith("-shutdown.cfg")


def test_malformed_model_snapshot_in_config_names_the_key(store: Path, tmp_path: Path) -> None:
    config = {"model_snapshot": '{"name":"startup.cfg","modelCount":1,"models":{"echo":{"1.0":{"defaultVersion":true,'
                                '"marName":"missing.mar","minWorkers":1}}}}'}
    with pytest.raises(RuntimeError) as err:
        harness.Server(store, workdir=tmp_path / "missing", config=config).start()
    assert "model_snapshot" in str(err.value) and "models.echo.1.0.marName 'missing.mar' is not in the model store" in str(
        err.value)
    config = {"model_snapshot": '{"models":{"echo":{"1.0":{"marName":"echo.mar","maxWorkers":1,"minWorkers":2}}}}'}
    with pytest.raises(RuntimeError) as err:
        harness.Server(store, workdir=tmp_path / "range", config=config).start()
    assert "models.echo.1.0.maxWorkers (1) cannot be less than minWorkers (2)" in str(err.value)
