"""Warm worker starts (docs/performance.md): plain workers are forked from the zygote, see what a
cold start would see, restart after a crash, and start cold when the zygote is gone or off."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
import requests

import harness

pytestmark = pytest.mark.slow

PROBE = Path(__file__).resolve().parent / "handlers" / "env_probe_handler.py"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    harness.build_mar(store, "probe", PROBE)
    return store


def probe(server: harness.Server, model: str = "probe") -> dict:
    r = server.predict(model, "x")
    assert r.status_code == 200, r.text
    return r.json()


def zygote_of(server: harness.Server) -> psutil.Process:
    # the server's own child: forked workers carry the zygote's command line too
    found = [p for p in psutil.Process(server.pid).children() if "ts.warmstart.zygote" in " ".join(p.cmdline())]
    assert len(found) == 1, found
    return found[0]


def worker_pids(server: harness.Server, model: str) -> list[int]:
    d = requests.get(f"{server.management_url}/models/{model}", timeout=30).json()[0]
    return [w["pid"] for w in d["workers"]]


@pytest.fixture(scope="module")
def server(store: Path):
    with harness.Server(store, {"warm_start_preload": "torch"}, env={"PROBE_VAR": "from-the-server"}) as s:
        r = s.register("probe.mar", initial_workers=2, synchronous="true")
        assert r.status_code == 200, r.text
        yield s


def test_workers_are_forked_from_the_zygote_and_see_a_cold_starts_world(server: harness.Server) -> None:
    zygote = zygote_of(server)
    seen: dict[int, dict] = {}
    with ThreadPoolExecutor(8) as pool:  # concurrent requests reach both workers
        for _ in range(20):
            for got in pool.map(lambda _: probe(server), range(8)):
                seen[got["pid"]] = got
            if len(seen) == 2:
                break
    assert set(seen) == set(worker_pids(server, "probe"))
    for got in seen.values():
        assert got["ppid"] == zygote.pid
        assert got["warm"] == "1"
        assert got["torchImported"], "the zygote preloaded torch"
        assert got["probe"] == "from-the-server"
        assert got["cwd"] == got["modelDir"]
        assert got["sysPath"][0] == got["modelDir"]
    a, b = seen.values()
    assert a["random"] != b["random"], "each worker gets its own random seed"


def startups(server: harness.Server, model: str) -> list[dict]:
    d = requests.get(f"{server.management_url}/models/{model}", timeout=30).json()[0]
    return [w["startup"] for w in d["workers"]]


def check_steps(startup: dict, warm: bool) -> None:
    """The steps of a finished start (docs/performance.md "Startup timing"), in their order."""
    assert startup["warm"] is warm
    for step in ("spawnMs", "importMs", "loadMs", "readyMs"):
        assert startup[step] >= 0, startup
    # the worker's import and load happen between the connection and READY (ms rounded each)
    assert startup["importMs"] + startup["loadMs"] <= startup["readyMs"] - startup["spawnMs"] + 2, startup


def test_describe_shows_where_each_start_went(server: harness.Server) -> None:
    for startup in startups(server, "probe"):
        check_steps(startup, warm=True)
    def both_answered_a_batch() -> bool:
        if all(s["firstBatchMs"] >= 0 for s in startups(server, "probe")):
            return True
        with ThreadPoolExecutor(8) as pool:  # concurrent requests reach both workers
            list(pool.map(lambda _: probe(server), range(8)))
        return False

    harness.wait_for(both_answered_a_batch, timeout=60, what="both workers answered a first batch")
    log = server.logs()
    for w in requests.get(f"{server.management_url}/models/probe", timeout=30).json()[0]["workers"]:
        name = f"W-{w['id']}-probe_1.0"
        assert f"{name}: model probe version 1.0 loaded by worker pid " in log
        assert f"{name}: first batch answered in {w['startup']['firstBatchMs']} ms" in log
    line = next(ln for ln in log.splitlines() if "loaded by worker pid" in ln)
    assert "(forked from the zygote: spawn " in line and ", import " in line and ", load " in line, line


def test_a_killed_worker_is_restarted_from_the_zygote(server: harness.Server) -> None:
    before = set(worker_pids(server, "probe"))
    victim = sorted(before)[0]
    os.kill(victim, signal.SIGKILL)

    def restarted() -> bool:
        d = requests.get(f"{server.management_url}/models/probe", timeout=30).json()[0]
        return (all(w["status"] == "READY" for w in d["workers"])
                and len({w["pid"] for w in d["workers"]} - before) == 1)

    harness.wait_for(restarted, timeout=60, what="the killed worker restarted and READY")
    new = (set(worker_pids(server, "probe")) - before).pop()
    assert psutil.Process(new).ppid() == zygote_of(server).pid
    assert probe(server)["warm"] == "1"
    for startup in startups(server, "probe"):  # the restarted worker's steps are its new start's
        check_steps(startup, warm=True)


def test_workers_start_cold_once_the_zygote_is_gone(store: Path) -> None:
    with harness.Server(store) as s:
        zygote_of(s).kill()
        harness.wait_for(lambda: "workers start cold from now on" in s.logs(), timeout=30, what="the zygote's exit noticed")
        r = s.register("probe.mar", initial_workers=1, synchronous="true")
        assert r.status_code == 200, r.text
        got = probe(s)
        assert got["warm"] == "" and got["ppid"] == s.pid


def test_warm_starts_can_be_turned_off(store: Path) -> None:
    with harness.Server(store, {"warm_worker_start": "false"}) as s:
        assert not [p for p in psutil.Process(s.pid).children() if "ts.warmstart.zygote" in " ".join(p.cmdline())]
        r = s.register("probe.mar", initial_workers=1, synchronous="true")
        assert r.status_code == 200, r.text
        got = probe(s)
        assert got["warm"] == "" and not got["torchImported"]
        (startup,) = startups(s, "probe")
        check_steps(startup, warm=False)


def test_stopping_the_server_leaves_no_worker_and_no_zygote(store: Path) -> None:
    s = harness.Server(store).start()
    try:
        assert s.register("probe.mar", initial_workers=2, synchronous="true").status_code == 200
        procs = psutil.Process(s.pid).children(recursive=True)
        assert len(procs) >= 3
    finally:
        s.stop()
    gone, alive = psutil.wait_procs(procs, timeout=15)
    assert not alive, [p.cmdline() for p in alive]


def _launch_with_the_cli(tmp_path: Path, store: Path) -> tuple[dict, Path, str]:
    """`torchserve --start` (detached) with the probe model: its env, its TMPDIR, its inference address."""
    from test_cli import run_cli, torchserve_cmd  # noqa: F401 - the CLI as a user runs it

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "LOG_LOCATION": str(tmp_path / "logs")}
    env.pop("TS_CONFIG_FILE", None)
    config = {**harness.server_config(store), "warm_start_preload": "torch"}
    path = harness.write_config(tmp_path / "config.properties", config)
    started = run_cli(["--start", "--ts-config", str(path), "--model-store", str(store), "--ncs",
                       "--models", "probe=probe.mar"], env, tmp_path)
    assert started.returncode == 0, started.stdout + started.stderr
    return env, tmp, config["inference_address"]


def test_the_launcher_starts_the_zygote_before_the_frontend_which_adopts_and_stops_it(
        store: Path, tmp_path: Path) -> None:
    from test_cli import run_cli

    env, tmp, inference = _launch_with_the_cli(tmp_path, store)
    try:
        jvm = psutil.Process(int((tmp / ".model_server.pid").read_text()))
        got = requests.post(f"{inference}/predictions/probe", data=b"x", timeout=30).json()
        zygote = psutil.Process(got["ppid"])
        assert got["warm"] == "1" and got["torchImported"]
        assert "ts.warmstart.zygote" in " ".join(zygote.cmdline()) and "--exit-on-stdin-eof" in zygote.cmdline()
        assert zygote.pid not in {p.pid for p in jvm.children(recursive=True)}, "the launcher's, not the JVM's"
        assert f"zygote pid {zygote.pid} (started by the launcher)" in (tmp_path / "logs" / "ts_log.log").read_text()
    finally:
        stopped = run_cli(["--stop"], env, tmp_path)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    psutil.wait_procs([zygote], timeout=15)
    assert not zygote.is_running()
    assert not list(tmp.glob("tsz-*")), "the frontend removed the zygote's socket folder"


def test_the_launchers_zygote_exits_with_a_killed_frontend(store: Path, tmp_path: Path) -> None:
    from test_cli import run_cli

    env, tmp, inference = _launch_with_the_cli(tmp_path, store)
    jvm = psutil.Process(int((tmp / ".model_server.pid").read_text()))
    zygote = psutil.Process(requests.post(f"{inference}/predictions/probe", data=b"x", timeout=30).json()["ppid"])
    workers = [p for p in jvm.children(recursive=True) if p.pid != zygote.pid]
    jvm.kill()
    _, alive = psutil.wait_procs([zygote], timeout=15)
    assert not alive, "the lifeline (its stdin) closed with the JVM"
    for p in workers:  # the worker launchers the JVM left behind: end them, as --stop would
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(workers, timeout=15)
    harness.wait_for(lambda: not list(tmp.glob("tsz-*")), 10, what="the zygote removed its socket folder")
    run_cli(["--stop"], env, tmp_path)


def test_an_empty_preload_still_forks_workers_without_importing_torch(store: Path) -> None:
    with harness.Server(store, {"warm_start_preload": ""}) as s:
        r = s.register("probe.mar", initial_workers=1, synchronous="true")
        assert r.status_code == 200, r.text
        got = probe(s)
        assert got["warm"] == "1" and got["ppid"] == zygote_of(s).pid
        assert not got["torchImported"], "nothing was preloaded, and the probe handler needs no torch"
