"""Packaging, as a user without the repository meets it: `make dist` builds the wheel (the frontend
jar inside) and the sdist (the Gradle build and the Java sources); the wheel installed into a clean
venv serves a prediction, and so does `pip install <sdist>`, which runs Gradle in the unpacked
sdist (its libraries, protoc and the grpc-java plugin come from Maven Central, through Gradle's
own cache in ~/.gradle). Without a JDK 17+ or Gradle that build stops with one line naming what
to install.

Without PyPI and without torch downloads: PIP_NO_INDEX=1, the throwaway venvs see this
interpreter's site-packages (torch, setuptools, pip) through a .pth line, pip runs with --no-deps
--no-build-isolation, and tserve itself is installed into each venv with --ignore-installed so it
shadows any editable copy. `make dist` runs in a copy of the sources with PY set to this interpreter.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
BUILD_INPUTS = ["build.gradle", "settings.gradle", "gradle.properties", "ts/version.txt", "frontend/src/main/proto/inference.proto",
                "frontend/src/main/proto/third_party/google/rpc/status.proto",
                "frontend/src/main/java/org/tserve/ModelServer.java", "model-archiver/model_archiver/model_packaging.py"]
NEEDS = "tserve's frontend needs a JDK 17+ and Gradle to build: apt install openjdk-17-jdk-headless gradle"


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


def build_env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV", "TSERVE_SKIP_JAVA_BUILD",
                                                            "TSERVE_GRADLE", "TSERVE_GRADLE_ARGS", "MAKEFLAGS", "MFLAGS",
                                                            # under `make test` the child make would count as a sub-make
                                                            # and print "Entering directory": the user's shell has none
                                                            "MAKELEVEL")}
    (work / "tmp").mkdir(exist_ok=True)
    env.update(TMPDIR=str(work / "tmp"), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("packaging")
    source_copy(work / "src")
    return work


@pytest.fixture(scope="module")
def dist(work: Path) -> dict[str, object]:
    if shutil.which("make") is None:
        pytest.skip("needs make")
    src, env = work / "src", build_env(work)
    make = ["make", "dist", f"PY={sys.executable}"]
    start = time.monotonic()
    first = run(make, cwd=src, env=env, timeout=900)
    seconds = time.monotonic() - start
    again = run(make, cwd=src, env=env, timeout=120)
    version = (src / "ts" / "version.txt").read_text().strip()
    return {"wheel": src / "dist" / f"tserve-{version}-py3-none-any.whl", "sdist": src / "dist" / f"tserve-{version}.tar.gz",
            "first": first.stdout + first.stderr, "again": again.stdout + again.stderr, "seconds": seconds}


@pytest.fixture(scope="module", params=["wheel", "sdist"])
def installed(request: pytest.FixtureRequest, work: Path, dist: dict[str, object]) -> dict[str, Path]:
    """A clean venv with make dist's wheel, or with `pip install <sdist>` (which builds the jar with Gradle)."""
    env = build_env(work)
    venv = work / f"venv-{request.param}"
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", "--without-pip", str(venv)], cwd=work, env=env, timeout=120)
    python = venv / "bin" / "python"
    purelib = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       cwd=work, env=env, timeout=60).stdout.strip())
    # this interpreter's packages (torch, pip, setuptools) as a plain path: its .pth files, such as
    # an editable tserve's, are not processed, so the venv's own tserve is the one imported
    (purelib / "parent-site-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    start = time.monotonic()
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--ignore-installed",
         str(dist[request.param])], cwd=work, env=env, timeout=900)
    print(f"pip install of the {request.param}: {time.monotonic() - start:.0f} s (make dist: {dist['seconds']:.0f} s)")
    return {"venv": venv, "purelib": purelib}


def test_make_dist_builds_once_then_is_quiet(dist: dict[str, object]) -> None:
    assert "Building dist/tserve-" in dist["first"]
    assert dist["again"] == "", dist["again"]


def test_sdist_has_what_the_jar_build_needs(dist: dict[str, object]) -> None:
    with tarfile.open(dist["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    missing = [f for f in BUILD_INPUTS if f not in names]
    assert not missing, f"sdist lacks {missing}"
    assert not [n for n in names if n.endswith(".jar") or n.startswith(("frontend/build/", ".gradle/", "dist/", ".venv/"))]


def test_wheel_ships_the_jar_and_the_console_scripts(dist: dict[str, object]) -> None:
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        jar = wheel.getinfo("ts/frontend/tserve-frontend.jar")
        assert jar.file_size > 1_000_000
        assert wheel.getinfo("ts/llm/engine/paged/paged_decode.c").file_size > 0  # native.py builds them where it serves
        assert wheel.getinfo("ts/llm/engine/fastpath/linear_bf16.c").file_size > 0
        entry_points = next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
        text = wheel.read(entry_points).decode()
        with zipfile.ZipFile(wheel.open(jar)) as fat:
            classes = set(fat.namelist())
    assert "torchserve = ts.model_server:start_cli" in text
    assert "torch-model-archiver = model_archiver.model_packaging:generate_model_archive" in text
    assert "torch-workflow-archiver = workflow_archiver.workflow_packaging:generate_workflow_archive" in text
    # the fat jar: tserve, the protoc-generated stubs, and Maven Central's libraries with epoll's JNI libraries
    for name in ("org/tserve/ModelServer.class", "io/netty/channel/epoll/Epoll.class", "io/grpc/netty/NettyServerBuilder.class",
                 "com/google/protobuf/Message.class", "org/apache/logging/log4j/core/LoggerContext.class",
                 "META-INF/native/libnetty_transport_native_epoll_x86_64.so",
                 "META-INF/native/libnetty_transport_native_epoll_aarch_64.so"):
        assert name in classes, name


@pytest.mark.parametrize("case", ["no gradle", "java 11", "TSERVE_GRADLE missing"])
def test_missing_build_tools_fail_in_one_line(case: str, work: Path, tmp_path: Path) -> None:
    """`pip install <source>` without a JDK 17+ or Gradle: one line naming what to install, no traceback."""
    # the sources only (make dist may have built in work/src already)
    src = shutil.copytree(work / "src", tmp_path / "src", ignore=shutil.ignore_patterns("dist", "build", ".gradle", ".venv", "*.egg-info",
                                                                                        "*.jar"))
    env, bin_dir = build_env(tmp_path), tmp_path / "bin"
    bin_dir.mkdir()
    if case == "no gradle":
        java = shutil.which("java")
        if java is None:
            pytest.skip("needs java")
        (bin_dir / "java").symlink_to(java)
        expected = "found no gradle on PATH"
    elif case == "java 11":
        gradle = shutil.which("gradle")
        if gradle is None:
            pytest.skip("needs gradle")
        (bin_dir / "gradle").symlink_to(gradle)
        jdk = tmp_path / "jdk11"
        (jdk / "bin").mkdir(parents=True)
        (jdk / "bin" / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
        (jdk / "bin" / "java").chmod(0o755)
        env["JAVA_HOME"] = str(jdk)
        expected = f"{jdk}/bin/java is Java 11"
    else:
        env["TSERVE_GRADLE"] = str(tmp_path / "no-such-gradle")
        expected = f"found no gradle ('{tmp_path / 'no-such-gradle'}' not found)"
    if case != "TSERVE_GRADLE missing":
        env["PATH"] = str(bin_dir)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "out"),
                           str(src)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    lines = [line.strip() for line in out.splitlines() if NEEDS in line]
    assert len(lines) == 1, out
    assert expected in lines[0], out
    assert "Traceback" not in out and "FileNotFoundError" not in out, out
    assert not list((tmp_path / "out").glob("*.whl"))


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


def test_deploy_doc_lists_the_java_versions() -> None:
    """docs/deploy.md's dependency table names every version gradle.properties sets."""
    doc = (harness.REPO / "docs" / "deploy.md").read_text()
    props = dict(re.findall(r"^(\w+Version)=(\S+)$", (harness.REPO / "gradle.properties").read_text(), re.M))
    assert props
    missing = {k: v for k, v in props.items() if v not in doc}
    assert not missing, f"docs/deploy.md lacks {missing}"
    assert "make java-deps" in doc


def model_server_address(config: Path) -> str:
    from ts import model_server

    return model_server.read_properties(config)["inference_address"]
