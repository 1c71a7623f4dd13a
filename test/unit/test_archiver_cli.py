"""The torch-model-archiver command: flags, exit codes and error messages.

Runs the console-script entry point (``model_archiver.model_packaging:generate_model_archive``
called with no arguments, exactly as the installed ``torch-model-archiver`` script does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import model_archiver

ARCHIVER_ROOT = Path(model_archiver.__file__).resolve().parents[1]
ENTRY = (
    "import sys; from model_archiver.model_packaging import generate_model_archive; "
    "sys.argv[0] = 'torch-model-archiver'; sys.exit(generate_model_archive())"
)


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ARCHIVER_ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "handler.py").write_text("def handle(data, context):\n    return data\n")
    (tmp_path / "model.pt").write_bytes(b"weights")
    (tmp_path / "model.py").write_text("class Net: pass\n")
    (tmp_path / "requirements.txt").write_text("requests\n")
    (tmp_path / "model-config.yaml").write_text("batchSize: 2\nmaxBatchDelay: 50\n")
    (tmp_path / "index_to_name.json").write_text('{"0": "cat"}')
    return tmp_path


BASE = ("--model-name", "net", "--version", "1.0", "--handler", "handler.py")


def assert_failed(proc: subprocess.CompletedProcess[str], *fragments: str, code: int = 1) -> None:
    assert proc.returncode == code, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_all_flags(work: Path) -> None:
    proc = run_cli(
        "--model-name", "net", "--version", "3.1", "--serialized-file", "model.pt", "--model-file", "model.py",
        "--handler", "handler.py", "--extra-files", "index_to_name.json", "--requirements-file", "requirements.txt",
        "--config-file", "model-config.yaml", "--runtime", "python3", "--export-path", "store",
        "--archive-format", "default", cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    with zipfile.ZipFile(work / "store" / "net.mar") as z:
        assert sorted(z.namelist()) == sorted([
            "model.py", "model.pt", "handler.py", "index_to_name.json", "requirements.txt",
            "model-config.yaml", "MAR-INF/MANIFEST.json",
        ])
        manifest = json.loads(z.read("MAR-INF/MANIFEST.json"))
    assert manifest["runtime"] == "python3"
    assert manifest["model"] == {
        "modelName": "net", "serializedFile": "model.pt", "handler": "handler.py", "modelFile": "model.py",
        "modelVersion": "3.1", "requirementsFile": "requirements.txt", "configFile": "model-config.yaml",
    }


def test_short_flags(work: Path) -> None:
    proc = run_cli(
        "--model-name", "net", "-v", "2", "--handler", "handler.py", "-r", "requirements.txt",
        "-c", "model-config.yaml", cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(work / "net.mar") as z:  # default export path: the cwd
        model = json.loads(z.read("MAR-INF/MANIFEST.json"))["model"]
    assert (model["modelVersion"], model["requirementsFile"], model["configFile"]) == (
        "2", "requirements.txt", "model-config.yaml"
    )


@pytest.mark.parametrize(("fmt", "output"), [("default", "net.mar"), ("zip-store", "net.mar"),
                                              ("tgz", "net.tar.gz"), ("no-archive", "net")])
def test_formats_and_force(work: Path, fmt: str, output: str) -> None:
    args = (*BASE, "--serialized-file", "model.pt", "--archive-format", fmt)
    assert run_cli(*args, cwd=work).returncode == 0
    assert (work / output).exists()
    proc = run_cli(*args, cwd=work)
    assert_failed(
        proc,
        f"{work / output} already exists.\n"
        "Please specify --force/-f option to overwrite the model archive output file.\n"
        "See -h/--help for more details.",
    )
    (work / "model.pt").write_bytes(b"v2")
    for force in ("-f", "--force"):
        assert run_cli(*args, force, cwd=work).returncode == 0
    if fmt == "no-archive":
        assert (work / "net" / "model.pt").read_bytes() == b"v2"


def test_no_archive_force_replaces_the_folder(work: Path) -> None:
    assert run_cli(*BASE, "--extra-files", "index_to_name.json", "--archive-format", "no-archive", cwd=work).returncode == 0
    assert run_cli(*BASE, "--archive-format", "no-archive", "-f", cwd=work).returncode == 0
    assert sorted(p.name for p in (work / "net").iterdir()) == ["MAR-INF", "handler.py"]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--serialized-file", "missing.pt", "Serialized file not found: missing.pt"),
        ("--model-file", "missing.py", "Model file not found: missing.py"),
        ("--requirements-file", "missing.txt", "Requirements file not found: missing.txt"),
        ("--config-file", "missing.yaml", "Config file not found: missing.yaml"),
        ("--extra-files", "index_to_name.json,missing.json", "Extra file not found: missing.json"),
    ],
)
def test_missing_files(work: Path, flag: str, value: str, message: str) -> None:
    proc = run_cli(*BASE, flag, value, cwd=work)
    assert_failed(proc, message, flag if flag != "--extra-files" else "--extra-files")
    assert not (work / "net.mar").exists()


def test_input_that_is_a_folder(work: Path) -> None:
    (work / "weights").mkdir()
    assert_failed(run_cli(*BASE, "--serialized-file", "weights", cwd=work), "Serialized file is not a file: weights")


@pytest.mark.parametrize("handler", ["nothere.py", "nothere", "nothere:handle", "nothere.py:handle"])
def test_missing_handler(work: Path, handler: str) -> None:
    proc = run_cli("--model-name", "net", "--version", "1", "--handler", handler, cwd=work)
    assert_failed(proc, "Handler file not found: nothere.py", "built-in handler name", "image_classifier")


@pytest.mark.parametrize("name", ["-net", "_net", "net/x", "net name", "nét", ".net"])
def test_invalid_model_name(work: Path, name: str) -> None:
    proc = run_cli(f"--model-name={name}", "--version", "1", "--handler", "handler.py", cwd=work)
    assert_failed(
        proc,
        f"Invalid model name {name!r}",
        "The allowed regular expression filter for model name is: ^[A-Za-z0-9][A-Za-z0-9_\\-.]*$",
    )


@pytest.mark.parametrize("name", ["n", "Net-1.0_b", "7up"])
def test_valid_model_names(work: Path, name: str) -> None:
    assert run_cli("--model-name", name, "--version", "1", "--handler", "handler.py", cwd=work).returncode == 0
    assert (work / f"{name}.mar").is_file()


def test_invalid_yaml_names_file_and_line(work: Path) -> None:
    (work / "bad.yaml").write_text("minWorkers: 1\nbatchSize: [2\nmaxBatchDelay: 5\n")
    proc = run_cli(*BASE, "--config-file", "bad.yaml", cwd=work)
    assert_failed(proc, "Config file bad.yaml is not valid YAML: line ")
    # the error points into the file (PyYAML reports the line where the flow sequence broke)
    line = int(proc.stderr.split("line ")[1].split(",")[0])
    assert 2 <= line <= 4
    assert not (work / "net.mar").exists()


def test_yaml_tab_indentation_error(work: Path) -> None:
    (work / "tabs.yaml").write_text("handler:\n\tmodel_path: x\n")
    assert_failed(run_cli(*BASE, "-c", "tabs.yaml", cwd=work), "Config file tabs.yaml is not valid YAML: line 2")


def test_yaml_that_is_not_a_mapping(work: Path) -> None:
    (work / "list.yaml").write_text("- minWorkers\n- 1\n")
    assert_failed(run_cli(*BASE, "-c", "list.yaml", cwd=work), "Config file list.yaml must be a YAML mapping")


def test_export_path_that_is_a_file(work: Path) -> None:
    assert_failed(run_cli(*BASE, "--export-path", "handler.py", cwd=work), "Given export-path handler.py is not a directory")


@pytest.mark.parametrize("missing", ["--model-name", "--version", "--handler"])
def test_required_flags(work: Path, missing: str) -> None:
    args = {"--model-name": "net", "--version": "1", "--handler": "handler.py"}
    del args[missing]
    proc = run_cli(*[x for kv in args.items() for x in kv], cwd=work)
    assert_failed(proc, "the following arguments are required", missing, code=2)


def test_bad_choices(work: Path) -> None:
    assert_failed(run_cli(*BASE, "--archive-format", "zip", cwd=work), "invalid choice: 'zip'", code=2)
    assert_failed(run_cli(*BASE, "--runtime", "java", cwd=work), "invalid choice: 'java'", code=2)


def test_help_lists_every_flag(work: Path) -> None:
    proc = run_cli("--help", cwd=work)
    assert proc.returncode == 0
    for flag in ("--model-name", "--serialized-file", "--model-file", "--handler", "--extra-files", "--runtime",
                 "--export-path", "--archive-format", "--force", "--version", "--requirements-file", "--config-file"):
        assert flag in proc.stdout


def test_python_dash_m(work: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ARCHIVER_ROOT))
    proc = subprocess.run([sys.executable, "-m", "model_archiver", *BASE], cwd=work, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (work / "net.mar").is_file()


def test_installed_console_script(work: Path) -> None:
    # `pip install -e .` (make) puts the script beside the interpreter; it must exit 0 on success
    # (a console script exits with its function's return value).
    script = Path(sys.executable).parent / "torch-model-archiver"
    assert script.exists(), f"{script} missing: install the project first (pip install -e .)"
    proc = subprocess.run([str(script), *BASE], cwd=work, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert (work / "net.mar").is_file()
    again = subprocess.run([str(script), *BASE], cwd=work, capture_output=True, text=True, timeout=120)
    assert_failed(again, "already exists")
