"""worker_census: which processes of a server are workers, and which of them no model describes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks import procstat, storm
from benchmarks.worker_census import Worker, undescribed, workers

PYTHON = "/venv/bin/python"
ZYGOTE = f"{PYTHON} -m ts.warmstart.zygote --socket /tmp/x/zygote.sock --preload torch"
LAUNCHER = f"{PYTHON} -I -S /repo/ts/warmstart/launch.py --zygote /tmp/x/zygote.sock -- --sock-type unix"
COLD = f"{PYTHON} -m ts.model_service_worker --sock-type unix --sock-name /tmp/x/.ts.sock.9001"
TORCHRUN = f"{PYTHON} -m ts.utils.die_with_parent 100 -- {PYTHON} -m torch.distributed.run --nproc-per-node 2"


def proc(pid: int, ppid: int, cmdline: str) -> procstat.ProcInfo:
    return procstat.ProcInfo(pid, ppid, cmdline, 0.0, 0.0)


def server_tree(*extra: procstat.ProcInfo) -> list[procstat.ProcInfo]:
    """The launcher (1), its zygote (2) and the JVM (3), two warm workers (launchers 10 and 11 forked
    as 20 and 21), a cold worker (12) with a handler's child (30), a torchrun agent (13) and its rank (31)."""
    return [proc(1, 0, f"{PYTHON} torchserve --start --foreground"), proc(2, 1, ZYGOTE), proc(3, 1, "/usr/bin/java -cp x"),
            proc(10, 3, LAUNCHER), proc(11, 3, LAUNCHER), proc(20, 2, ZYGOTE), proc(21, 2, ZYGOTE),
            proc(12, 3, COLD), proc(30, 12, f"{PYTHON} -c child"), proc(13, 3, TORCHRUN),
            proc(31, 13, f"{PYTHON} -m ts.model_service_worker --sock-name /tmp/x/.ts.sock.9100"), *extra]


STDOUTS = {10: "pipe:[100]", 20: "pipe:[100]", 11: "pipe:[101]", 21: "pipe:[101]", 12: "pipe:[102]",
           13: "pipe:[103]", 22: "pipe:[104]"}


def found(tree: list[procstat.ProcInfo]) -> list[Worker]:
    return workers(tree, STDOUTS.get)


def test_a_warm_worker_is_its_launcher_and_the_fork_that_holds_its_stdout() -> None:
    assert sorted(w.pids for w in found(server_tree())) == [(10, 20), (11, 21), (12,), (13,)]


def test_every_worker_described_by_either_of_its_pids_leaves_none_undescribed() -> None:
    # the fork once LOADED named it, the launcher before; the cold worker and the torchrun agent by their own pid
    assert undescribed(found(server_tree()), {20, 11, 12, 13}) == []


def test_a_planted_undescribed_worker_is_found() -> None:
    leaked = [w.pids for w in undescribed(found(server_tree()), {20, 21, 13})]
    assert leaked == [(12,)]
    assert [w.pids for w in undescribed(found(server_tree()), set())] == [(10, 20), (11, 21), (12,), (13,)]


def test_a_fork_whose_launcher_is_gone_is_a_worker_of_its_own() -> None:
    orphan = proc(22, 2, ZYGOTE)
    assert [w.pids for w in undescribed(found(server_tree(orphan)), {20, 21, 12, 13})] == [(22,)]


def test_a_real_process_below_this_one_is_found_until_described() -> None:
    """A live planted worker: a process whose command line names ts.model_service_worker, started below
    this test's process, is found in /proc and is undescribed until its pid is described."""
    planted = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(60)", "ts.model_service_worker"],
                               stdout=subprocess.PIPE)
    try:
        mine = workers(procstat.process_tree(os.getpid()))
        assert [w.pids for w in undescribed(mine, set())] == [(planted.pid,)]
        assert undescribed(mine, {planted.pid}) == []
    finally:
        planted.kill()
        planted.wait()


def test_the_storm_reports_a_leftover_worker_and_an_unanswered_call_as_problems(tmp_path: Path) -> None:
    report = {"undescribed_workers": [{"pids": [10, 20], "cmdline": LAUNCHER}], "settle_s": 30.0,
              "outcomes": {"register": {"200": 3, storm.RESET: 1}, "unregister": {"200": 2}},
              "models_listed_after_unregister": []}
    found_problems = storm.problems(report)
    assert len(found_problems) == 2
    assert "1 worker(s) that no model describes" in found_problems[0] and "[10, 20]" in found_problems[0]
    assert "register: reset" in found_problems[1]
    clean = {**report, "undescribed_workers": [], "outcomes": {"register": {"200": 3, "409": 4, storm.RETIRED_LABEL: 1}}}
    assert storm.problems(clean) == []  # a worker refused for a retired version is the fix at work
    internal = {**clean, "outcomes": {"unregister": {"200": 3, f"500 {storm.INTERNAL_LABEL}": 1}}}
    assert storm.problems(internal) == ["answers 'Internal error' (an exception the server did not expect): "
                                        "{'unregister: 500 internal': 1}"]
    assert storm.race_hits(clean) == 1 and "race reached 1 times" in storm.line({**clean, "settle_s": 0.0})


class _Clock:
    """time.monotonic and time.sleep for storm.settle: the clock moves only when it sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def settled(monkeypatch, censuses: list[list[Worker]], seconds: float, confirm_s: float) -> tuple[list[Worker], float]:
    clock, polls = _Clock(), iter(censuses)
    monkeypatch.setattr(storm.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(storm.time, "sleep", clock.sleep)
    monkeypatch.setattr(storm.worker_census, "census", lambda root, port: next(polls, []))
    srv = type("Srv", (), {"pid": 1, "management_port": 2})()
    return storm.settle(srv, seconds, confirm_s)  # type: ignore[arg-type]


def test_settle_waits_for_stopping_workers_then_confirms_the_census_stays_clean(monkeypatch) -> None:
    leaked = Worker((10, 20), LAUNCHER)
    assert settled(monkeypatch, [[leaked], [leaked], []], seconds=30, confirm_s=1.0) == ([], 1.0)


def test_settle_reports_a_worker_that_comes_back_between_two_clean_censuses(monkeypatch) -> None:
    """A leaked worker that restarts is absent from some censuses: a clean one is not enough."""
    leaked = Worker((10, 20), LAUNCHER)
    flapping = [[leaked], []] * 20
    assert settled(monkeypatch, flapping, seconds=5, confirm_s=1.0)[0] == [leaked]
