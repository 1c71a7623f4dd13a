"""benchmarks.soak hostile's issue-43 scenarios through the real server, short: a storm of a few
seconds and one SIGTERM under load. What is checked is that each run computes its invariant (the
census sees the server's real workers, every call's answer is counted), not how fast anything is."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import hostile_suite, models, procstat, servers, worker_census

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def working_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers run the working tree's ts and jar, not a snapshot an earlier benchmark left."""
    monkeypatch.setattr(servers, "SNAPSHOT", tmp_path / "no-snapshot")


def suite_args(*argv: str) -> argparse.Namespace:
    return hostile_suite.parser().parse_args(list(argv))


def test_the_census_sees_a_servers_real_workers_and_finds_them_described(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    models.build_tserve(models.ModelSpec("echo", str(models.HANDLERS / "hostile_soak_handler.py")), store)
    with servers.Server(servers.kinds()["tserve"], store, models=["echo=echo.mar"],
                        config={"default_workers_per_model": "2"}, run_dir=tmp_path / "server") as srv:
        srv.wait_prediction("echo", b"x", timeout=180)
        described = worker_census.described_pids(srv.management_port)
        found = worker_census.workers(procstat.process_tree(srv.pid))
        assert len(found) == 2 and len(described) == 2, (found, described)
        assert worker_census.undescribed(found, described) == []
        assert worker_census.census(srv.pid, srv.management_port) == []
        # the same workers, were no model to describe them, are what the storm's check reports
        assert worker_census.undescribed(found, set()) == found


def test_a_short_storm_counts_every_call_and_checks_for_undescribed_workers(tmp_path: Path) -> None:
    args = suite_args("--storm-duration", "4", "--settle", "30")
    report, problems, text = hostile_suite.storm_run(args, tmp_path / "storm")
    assert set(report["outcomes"]) == {"register", "register async", "scale up", "scale down", "unregister"}
    assert all(sum(c.values()) > 0 for c in report["outcomes"].values()), report["outcomes"]
    assert report["models_listed_after_unregister"] == []
    assert report["undescribed_workers"] == [], report
    assert problems == [] and "undescribed workers 0" in text


def test_one_sigterm_under_load_gives_answers_and_no_reset(tmp_path: Path) -> None:
    args = suite_args("--stop-clients", "8", "--warm", "1")
    report, problems, text = hostile_suite.sigterm_run(args, tmp_path / "sigterm")
    assert report["outcomes"].get("200", 0) > 0, report
    assert report["transport"] == "epoll" and report["clients"] == 8
    assert problems == [], text
