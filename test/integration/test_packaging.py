"""`pip install` from an sdist, as a user without the repository does it: the sdist carries the
Gradle build and the Java sources, building its wheel runs Gradle and puts the frontend jar into
the wheel, and the installed `torchserve` / `torch-model-archiver` serve a prediction.

Offline and without torch downloads: the throwaway venv sees this interpreter's site-packages
(torch, setuptools, pip) through a .pth line, pip runs with --no-deps --no-build-isolation, and
tserve itself is installed into the venv with --ignore-installed so it shadows any editable copy.
`pip install <sdist>` is exactly these two steps (build the wheel with the PEP 517 backend, install it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
BUILD_INPUTS = ["build.gradle", "settings.gradle", "gradle.properties", "ts/version.txt", "frontend/src/main/proto/inference.proto",
                "frontend/src/main/java/org/tserve/ModelServer.java", "model-archiver/model_archiver/model_packaging.py"]


def run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def source_copy(dest: Path) -> Path:
    """The files a clone of the repository has (tracked, plus new files not ignored): no build outputs."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=harness.REPO, capture_output=True,
                            timeout=60)
    if listed.returncode != 0:
        pytest.skip("needs a git checkout to know the source files")
    for name in filter(None, listed.stdout.decode().split("\0")):
        src = harness.REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("packaging")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    env.update(TMPDIR=str(work), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    (work / "tmp").mkdir()
    src = source_copy(work / "src")
    run([sys.executable, "-c", "from setuptools import build_meta as b; print(b.build_sdist('dist'))"], cwd=src, env=env, timeout=300)
    sdist = next((src / "dist").glob("tserve-*.tar.gz"))
    wheels = work / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(sdist)],
        cwd=work, env=env, timeout=900)
    wheel = next(wheels.glob("tserve-*.whl"))

    venv = work / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", "--without-pip", str(venv)], cwd=work, env=env, timeout=120)
    python = venv / "bin" / "python"
    purelib = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       cwd=work, env=env, timeout=60).stdout.strip())
    # this interpreter's packages (torch, pip, setuptools) as a plain path: its .pth files, such as
    # an editable tserve's, are not processed, so the venv's own tserve is the one imported
    (purelib / "parent-site-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--ignore-installed", str(wheel)],
        cwd=work, env=env, timeout=300)
    return {"work": work, "sdist": sdist, "wheel": wheel, "venv": venv, "purelib": purelib, "env_tmp": work / "tmp"}


def test_sdist_has_what_the_jar_build_needs(installed: dict[str, Path]) -> None:
    with tarfile.open(installed["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    missing = [f for f in BUILD_INPUTS if f not in names]
    assert not missing, f"sdist lacks {missing}"
    assert not [n for n in names if n.endswith(".jar") or n.startswith("frontend/build/")]


def test_wheel_ships_the_jar_and_the_console_scripts(installed: dict[str, Path]) -> None:
    with zipfile.ZipFile(installed["wheel"]) as wheel:
        jar = wheel.getinfo("ts/frontend/tserve-frontend.jar")
        assert jar.file_size > 1_000_000
        entry_points = next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
        text = wheel.read(entry_points).decode()
    assert "torchserve = ts.model_server:start_cli" in text
    assert "torch-model-archiver = model_archiver.model_packaging:generate_model_archive" in text
    assert "torch-workflow-archiver = workflow_archiver.workflow_packaging:generate_workflow_archive" in text


def test_installed_package_serves(installed: dict[str, Path], tmp_path: Path) -> None:
    venv, purelib = installed["venv"], installed["purelib"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TS_CONFIG_FILE")}
    env.update(TMPDIR=str(tmp_path), LOG_LOCATION=str(tmp_path / "logs"))
    where = run([str(venv / "bin" / "python"), "-c", "import ts, model_archiver, ts.model_server as m; "
                 "print(ts.__file__); print(model_archiver.__file__); print(m.frontend_jar())"], cwd=tmp_path, env=env, timeout=60)
    for line in where.stdout.split():
        assert Path(line).is_relative_to(purelib), where.stdout
    assert (purelib / "ts" / "frontend" / "tserve-frontend.jar").is_file()

    version = run([str(venv / "bin" / "torchserve"), "-v"], cwd=tmp_path, env=env, timeout=60).stdout
    archiver = run([str(venv / "bin" / "torch-workflow-archiver"), "-v"], cwd=tmp_path, env=env, timeout=60).stdout
    assert archiver.startswith("torch-workflow-archiver ")
    assert version.startswith("TorchServe Version is ") and "tserve" in version

    store = tmp_path / "store"
    run([str(venv / "bin" / "torch-model-archiver"), "--model-name", "echo", "--version", "1.0", "--handler",
         str(HANDLERS / "echo_handler.py"), "--export-path", str(store)], cwd=tmp_path, env=env, timeout=120)
    config = harness.write_config(tmp_path / "config.properties", harness.server_config(store))
    inference = model_server_address(config)
    run([str(venv / "bin" / "torchserve"), "--start", "--ts-config", str(config), "--models", "echo=echo.mar", "--ncs"],
        cwd=tmp_path, env=env, timeout=300)
    try:
        r = requests.post(f"{inference}/predictions/echo", data=b"from the wheel", timeout=60)
        assert r.status_code == 200, r.text
        assert json.loads(r.text)["text"] == "from the wheel"
    finally:
        stopped = subprocess.run([str(venv / "bin" / "torchserve"), "--stop"], cwd=tmp_path, env=env, capture_output=True,
                                 text=True, timeout=120)
    assert "TorchServe has stopped." in stopped.stdout


def model_server_address(config: Path) -> str:
    from ts import model_server

    return model_server.read_properties(config)["inference_address"]
