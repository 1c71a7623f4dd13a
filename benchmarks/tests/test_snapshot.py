"""The benchmark snapshot says when it no longer holds the working tree's ``ts``."""
from __future__ import annotations

import os
import time

from benchmarks import servers


def _tree(tmp_path, monkeypatch):
    repo, snapshot = tmp_path / "repo", tmp_path / "snapshot"
    (repo / "ts" / "llm" / "engine").mkdir(parents=True)
    (repo / "ts" / "llm" / "engine" / "generation.py").write_text("x = 1\n")
    monkeypatch.setattr(servers, "REPO", repo)
    monkeypatch.setattr(servers, "SNAPSHOT", snapshot)
    monkeypatch.setattr(servers, "SNAPSHOT_TAKEN", snapshot / "TAKEN")
    return repo, snapshot


def test_a_snapshot_without_its_mark_is_reported(tmp_path, monkeypatch):
    _tree(tmp_path, monkeypatch)
    assert "predates the snapshot check" in servers.stale_snapshot()


def test_a_file_changed_after_the_snapshot_is_named_and_a_fresh_one_is_quiet(tmp_path, monkeypatch):
    repo, snapshot = _tree(tmp_path, monkeypatch)
    snapshot.mkdir()
    (snapshot / "TAKEN").write_text("abc123\n")
    past = time.time() - 60
    os.utime(repo / "ts" / "llm" / "engine" / "generation.py", (past, past))
    os.utime(snapshot / "TAKEN", (past + 30, past + 30))  # taken after that file, before the edit below
    assert servers.stale_snapshot() is None
    (repo / "ts" / "llm" / "engine" / "generation.py").write_text("x = 2\n")
    assert servers.stale_snapshot() == f"ts/llm/engine/generation.py changed after {snapshot} was taken"
