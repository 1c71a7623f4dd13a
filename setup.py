"""Packaging: `pip install .` builds the Java frontend with Gradle and ships its jar inside `ts`.

Everything else lives in pyproject.toml; this file only adds the build step and the
`model_archiver` and `workflow_archiver` packages, whose sources sit in `model-archiver/` as in TorchServe's tree.
"""

import os
import shlex
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
JAR = ROOT / "ts" / "frontend" / "tserve-frontend.jar"


class BuildFrontend(build_py):
    """Builds the frontend jar from this tree so the installed jar always matches the sources."""

    def run(self) -> None:
        # TSERVE_SKIP_JAVA_BUILD=1: the caller (make) built the jar already, or an editable
        # install will find it in the tree once built.
        if os.environ.get("TSERVE_SKIP_JAVA_BUILD") != "1":
            # Offline against Debian's jars by default; TSERVE_GRADLE_ARGS="-Prepo=central" elsewhere.
            extra = shlex.split(os.environ.get("TSERVE_GRADLE_ARGS", "--offline"))
            subprocess.check_call(["gradle", "--no-daemon", "-q", *extra, "packageJar"], cwd=ROOT)
            if not JAR.is_file():
                raise SystemExit(f"frontend jar missing at {JAR}: the Gradle build did not produce it")
        super().run()


setup(
    packages=find_packages(include=["ts", "ts.*"])
    + find_packages("model-archiver", include=["model_archiver", "model_archiver.*", "workflow_archiver", "workflow_archiver.*"]),
    package_dir={"model_archiver": "model-archiver/model_archiver", "workflow_archiver": "model-archiver/workflow_archiver"},
    package_data={"ts": ["version.txt", "frontend/*.jar", "configs/*.yaml", "configs/*.properties"]},
    include_package_data=True,
    cmdclass={"build_py": BuildFrontend},
)
