"""Packaging: `pip install .` builds the Java frontend with Gradle and ships its jar inside `ts`.

Everything else lives in pyproject.toml; this file only adds the build step and the
`model_archiver` and `workflow_archiver` packages, whose sources sit in `model-archiver/` as in TorchServe's tree.
"""

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
JAR = ROOT / "ts" / "frontend" / "tserve-frontend.jar"
JAVA_MAJOR = 17
NEEDS = (f"tserve's frontend needs a JDK {JAVA_MAJOR}+ and Gradle to build: apt install openjdk-{JAVA_MAJOR}-jdk-headless gradle "
         "(or set TSERVE_GRADLE to a gradle executable, JAVA_HOME to a JDK)")


def java_major(java: str) -> int | None:
    """The major version `java -version` reports (8 for 1.8.0_x), None when it cannot be run or read."""
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r'version "(?:1\.)?(\d+)', proc.stderr + proc.stdout)
    return int(found.group(1)) if found else None


def build_tools() -> str:
    """The gradle command to run, once a JDK 17+ is there for it; else SystemExit with one line."""
    gradle = shutil.which(os.environ.get("TSERVE_GRADLE") or "gradle")
    # Gradle runs on JAVA_HOME's java when it is set, else on the java on PATH
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    major = java_major(java) if java else None
    if gradle is None or major is None or major < JAVA_MAJOR:
        found = [f"no gradle ({os.environ['TSERVE_GRADLE']!r} not found)" if os.environ.get("TSERVE_GRADLE") else
                 "no gradle on PATH"] if gradle is None else []
        if major is None:
            found.append(f"no java at {java}" if java else "no java on PATH")
        elif major < JAVA_MAJOR:
            found.append(f"{java} is Java {major}")
        raise SystemExit(f"{NEEDS}; found {', '.join(found)}")
    return gradle


class BuildFrontend(build_py):
    """Builds the frontend jar from this tree so the installed jar always matches the sources."""

    def run(self) -> None:
        # TSERVE_SKIP_JAVA_BUILD=1: the caller (make) built the jar already, or an editable
        # install will find it in the tree once built.
        if os.environ.get("TSERVE_SKIP_JAVA_BUILD") != "1":
            # libraries, protoc and the grpc-java plugin come from Maven Central (cached in ~/.gradle);
            # TSERVE_GRADLE_ARGS adds options, e.g. "--offline" once that cache is warm
            cmd = [build_tools(), "--no-daemon", "-q", *shlex.split(os.environ.get("TSERVE_GRADLE_ARGS", "")), "packageJar"]
            rc = subprocess.call(cmd, cwd=ROOT)
            if rc != 0:
                raise SystemExit(f"building tserve's frontend failed: {shlex.join(cmd)} exited with {rc} (its output is above)")
            if not JAR.is_file():
                raise SystemExit(f"frontend jar missing at {JAR}: the Gradle build did not produce it")
        super().run()


setup(
    packages=find_packages(include=["ts", "ts.*"])
    + find_packages("model-archiver", include=["model_archiver", "model_archiver.*", "workflow_archiver", "workflow_archiver.*"]),
    package_dir={"model_archiver": "model-archiver/model_archiver", "workflow_archiver": "model-archiver/workflow_archiver"},
    package_data={"ts": ["version.txt", "frontend/*.jar", "configs/*.yaml", "configs/*.properties", "llm/engine/paged/*.c", "llm/engine/fastpath/*.c"]},
    include_package_data=True,
    cmdclass={"build_py": BuildFrontend},
)
