"""The torch-workflow-archiver command: the .war it writes, -f, and its error messages.

Calls the console-script entry point in-process (``main(argv)``, what ``generate_workflow_archive``
runs with ``sys.argv``).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from workflow_archiver.workflow_packaging import main

SPEC = "models:\n  m1:\n    url: m1.mar\ndag:\n  pre: [m1]\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "handler.py").write_text("def pre(data, context):\n    return data\n")
    (tmp_path / "labels.json").write_text("{}")
    return tmp_path


def archive(files: Path, *extra: str) -> int:
    return main(["--workflow-name", "wf", "--spec-file", str(files / "spec.yaml"), "--handler", str(files / "handler.py"),
                 "--export-path", str(files / "out"), *extra])


def test_war_holds_spec_handler_extra_files_and_manifest(files: Path) -> None:
    assert archive(files, "--extra-files", str(files / "labels.json")) == 0
    with zipfile.ZipFile(files / "out" / "wf.war") as z:
        assert sorted(z.namelist()) == ["WAR-INF/MANIFEST.json", "handler.py", "labels.json", "spec.yaml"]
        manifest = json.loads(z.read("WAR-INF/MANIFEST.json"))
    assert manifest["workflow"] == {"workflowName": "wf", "specFile": "spec.yaml", "handler": "handler.py"}


def test_existing_war_needs_force(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert archive(files) == 0
    assert archive(files) == 1
    assert "already exists" in capsys.readouterr().err
    assert archive(files, "-f") == 0


@pytest.mark.parametrize(("args", "spec", "message"), [
    (["--workflow-name", "bad name"], SPEC, "Invalid workflow name 'bad name'"),
    (["--handler", None], SPEC, "nodes ['pre'] are not models"),
    ([], "models: {}\n", "has no 'dag:' section"),
    (["--spec-file", "missing.yaml"], SPEC, "Spec file not found"),
])
def test_errors_name_the_problem(files: Path, capsys: pytest.CaptureFixture[str], args: list, spec: str,
                                 message: str) -> None:
    (files / "spec.yaml").write_text(spec)
    opts = {"--workflow-name": "wf", "--spec-file": str(files / "spec.yaml"), "--handler": str(files / "handler.py"),
            "--export-path": str(files / "out")}
    opts.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = [x for k, v in opts.items() if v is not None for x in (k, v)]
    assert main(argv) == 1
    assert message in capsys.readouterr().err
    assert not (files / "out" / "wf.war").exists()


def test_failed_write_leaves_the_old_war_and_says_so(files: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from model_archiver import writers

    assert archive(files) == 0
    before = sorted((files / "out").iterdir())

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writers, "copy_stream", disk_full)
    assert archive(files, "-f") == 1
    err = capsys.readouterr().err
    assert "Failed to write" in err and "No space left on device" in err and "no archive was written" in err
    assert "Traceback" not in err
    assert sorted((files / "out").iterdir()) == before   # the old .war, no temporary file


def test_unwritable_export_path_names_it(files: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from model_archiver import writers

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(writers, "open_writer", denied)
    assert archive(files) == 1
    err = capsys.readouterr().err
    assert f"Cannot write to export-path {files / 'out'}: Permission denied" in err
