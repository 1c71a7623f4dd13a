"""Where the `torchserve` launcher reads the compatibility switch when --ts-config is not given:
the file the frontend would read (the latest config snapshot, else ./config.properties)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ts import model_server


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOG_LOCATION", str(tmp_path / "logs"))
    return tmp_path


def test_no_config_anywhere_is_tserve(cwd: Path) -> None:
    assert not model_server.torchserve_compatible(model_server._implicit_config(False))


def test_config_properties_in_the_working_directory(cwd: Path) -> None:
    (cwd / "config.properties").write_text("compatibility = TorchServe-0.12\n")
    assert model_server.torchserve_compatible(model_server._implicit_config(False))


def test_the_latest_snapshot_wins_unless_snapshots_are_off(cwd: Path) -> None:
    (cwd / "config.properties").write_text("compatibility=torchserve-0.12\n")
    snapshots = cwd / "logs" / "config"
    snapshots.mkdir(parents=True)
    (snapshots / "20260101000000000-startup.cfg").write_text("compatibility=torchserve-0.12\n")
    (snapshots / "20260102000000000-shutdown.cfg").write_text("inference_address=http://127.0.0.1:1\n")
    (snapshots / "junk.cfg").write_text("compatibility=torchserve-0.12\n")
    assert not model_server.torchserve_compatible(model_server._implicit_config(False))
    assert model_server.torchserve_compatible(model_server._implicit_config(True))
