"""Where the frontend's Java runtime and jar are: shared by the launcher (ts.model_server) and by
ts.model_settings, which asks the jar to resolve a model-config.yaml without a server."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import ts

JAVA_PACKAGE_HINT = "install a Java 17 runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"


class LauncherError(Exception):
    """A problem the user can fix; printed as one line, exit status 1."""


def frontend_jar() -> Path:
    return Path(ts.__file__).resolve().parent / "frontend" / "tserve-frontend.jar"


# options the user's own vmargs may carry: then theirs decide and ours stay out
_CDS_OPTIONS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")
_QUIET = "-Xlog:cds=off,cds+dynamic=off"


def archive_path() -> Path:
    """The frontend's class-data-sharing archive (written by ``python -m ts.class_archive``)."""
    return frontend_jar().with_suffix(".jsa")


def class_archive_options(vmargs: Sequence[str]) -> list[str]:
    """The JVM options that map the frontend's class archive, or none: no archive, one older than
    the jar, or ``vmargs`` that choose class sharing themselves."""
    if any(a.startswith(_CDS_OPTIONS) for a in vmargs):
        return []
    jsa, jar = archive_path(), frontend_jar()
    try:
        if jsa.stat().st_mtime < jar.stat().st_mtime:
            return []
    except OSError:
        return []
    return [f"-XX:SharedArchiveFile={jsa}", _QUIET]


def find_java() -> str:
    """JAVA_HOME first, then PATH, as TorchServe does."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise LauncherError(f"JAVA_HOME is set to {java_home} but {candidate} is not an executable; fix JAVA_HOME or {JAVA_PACKAGE_HINT}.")
    found = shutil.which("java")
    if not found:
        raise LauncherError(f"Java was not found on PATH: {JAVA_PACKAGE_HINT}.")
    return found
