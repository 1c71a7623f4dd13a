"""The frontend's class-data-sharing archive: built by a training run, mapped by the JVM, and passed
by the launcher only while it matches the jar (ts/class_archive.py, ts.utils.java)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ts import class_archive, model_server
from ts.utils import java


@pytest.fixture
def jar_and_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    jar = tmp_path / "tserve-frontend.jar"
    jar.write_bytes(b"jar")
    monkeypatch.setattr(java, "frontend_jar", lambda: jar)
    return jar, jar.with_suffix(".jsa")


def test_options_map_the_archive_only_while_it_is_newer_than_the_jar(jar_and_archive: tuple[Path, Path]) -> None:
    jar, jsa = jar_and_archive
    assert java.class_archive_options([]) == []   # none built
    jsa.write_bytes(b"jsa")
    os.utime(jar, (1_000, 1_000))
    os.utime(jsa, (2_000, 2_000))
    assert java.class_archive_options(model_server.DEFAULT_VMARGS) == [f"-XX:SharedArchiveFile={jsa}",
                                                                       "-Xlog:cds=off,cds+dynamic=off"]
    os.utime(jar, (3_000, 3_000))   # the jar was rebuilt after it: the archive would not map
    assert java.class_archive_options([]) == []


def test_the_users_own_class_sharing_options_win(jar_and_archive: tuple[Path, Path]) -> None:
    jar, jsa = jar_and_archive
    jsa.write_bytes(b"jsa")
    os.utime(jar, (1_000, 1_000))
    for theirs in ("-Xshare:off", "-XX:SharedArchiveFile=/opt/app.jsa", "-XX:ArchiveClassesAtExit=/tmp/x.jsa"):
        assert java.class_archive_options(["-Xmx1g", theirs]) == []


@pytest.mark.slow
def test_the_training_run_writes_an_archive_the_jvm_maps(tmp_path: Path) -> None:
    assert java.frontend_jar().is_file(), "no frontend jar: make install builds it"
    jsa = class_archive.build(tmp_path / "frontend.jsa")
    # -Xshare:on fails the start when the archive cannot be mapped; the class log says where each class came from
    out = subprocess.run([java.find_java(), "-Xshare:on", f"-XX:SharedArchiveFile={jsa}", "-Xlog:class+load=info",
                          "-cp", str(java.frontend_jar()), model_server.MAIN_CLASS, "--no-such-option"],
                         capture_output=True, text=True, timeout=60)
    assert "org.tserve.ModelServer source: shared objects file (top)" in out.stdout, out.stdout[-2000:] + out.stderr
    assert "Unknown option --no-such-option" in out.stdout + out.stderr


def test_the_launcher_command_carries_the_archive(jar_and_archive: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    jar, jsa = jar_and_archive
    monkeypatch.setattr(model_server, "frontend_jar", lambda: jar)
    jsa.write_bytes(b"jsa")
    os.utime(jar, (1_000, 1_000))
    cmd = model_server.build_java_command(model_store=None, java="/usr/bin/java")
    assert f"-XX:SharedArchiveFile={jsa}" in cmd and cmd.index(f"-XX:SharedArchiveFile={jsa}") < cmd.index("-cp")
    assert not any("SharedArchiveFile" in a for a in model_server.build_java_command(
        model_store=None, java="/usr/bin/java", vmargs=["-Xshare:off"]))
