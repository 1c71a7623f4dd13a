"""The frontend's class-data-sharing archive, ``ts/frontend/tserve-frontend.jsa``.

    python -m ts.class_archive      # (re)build it; `make install` does this after the jar

A server start maps the archive instead of reading, parsing and verifying the few thousand classes
it loads from the jar: about half of the JVM's start CPU (docs/performance.md). The JVM writes it at
the end of a training run (a server started with no models on free 127.0.0.1 ports, asked for its
models, stopped), with ``-XX:ArchiveClassesAtExit``. The archive belongs to one jar and one JVM: the
launcher passes it only when it is newer than the jar (ts.utils.java.class_archive_options), and the JVM skips one a different JDK wrote
without printing anything (``-Xlog:cds=off``), so a stale archive costs speed, never a start.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from ts.model_server import DEFAULT_VMARGS, READY_LINE, build_java_command
from ts.utils.free_ports import free_port
from ts.utils.java import LauncherError, archive_path
from ts.utils.process_tree import stop_process_tree

TRAINING_TIMEOUT_S = 180.0


def training_config(work: Path) -> Path:
    """A config.properties for a bare start: every port free on 127.0.0.1, no zygote, no token."""
    ports = {key: free_port() for key in ("inference", "management", "metrics", "grpc_inference", "grpc_management")}
    config = work / "config.properties"
    config.write_text(
        "".join(f"{key}_address=http://127.0.0.1:{ports[key]}\n" for key in ("inference", "management", "metrics"))
        + f"grpc_inference_port={ports['grpc_inference']}\ngrpc_management_port={ports['grpc_management']}\n"
        + "warm_worker_start=false\ndisable_token_authorization=true\n")
    return config


def await_ready(proc: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    """Returns once the server logged its ready line; a clear error when it exited or timed out."""
    while READY_LINE not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            raise LauncherError(f"the training run of the class archive exited with status {proc.returncode}: "
                                + log.read_text(errors="replace")[-2000:])
        if time.monotonic() > deadline:
            raise LauncherError(f"the training run of the class archive did not start within {TRAINING_TIMEOUT_S:.0f} s: "
                                + log.read_text(errors="replace")[-2000:])
        time.sleep(0.1)


def build(target: Path | None = None) -> Path:
    """Runs the training start and writes the archive (atomically) to ``target``."""
    target = target or archive_path()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tserve-jsa-") as tmp:
        work = Path(tmp)
        (work / "store").mkdir()
        partial = work / "frontend.jsa"
        config = training_config(work)
        cmd = build_java_command(model_store=work / "store", ts_config=config, no_config_snapshots=True,
                                 disable_token_auth=True, tmp_dir=work,
                                 vmargs=[*DEFAULT_VMARGS, f"-XX:ArchiveClassesAtExit={partial}"])
        log = work / "server.log"
        env = {**os.environ, "LOG_LOCATION": str(work / "logs"), "METRICS_LOCATION": str(work / "logs")}
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            await_ready(proc, log, time.monotonic() + TRAINING_TIMEOUT_S)
            props = dict(line.split("=", 1) for line in config.read_text().splitlines())
            for url in (f"{props['management_address']}/models", f"{props['inference_address']}/ping"):
                with urllib.request.urlopen(url, timeout=30) as answer:   # the request path's classes too
                    answer.read()
        finally:
            stop_process_tree(proc.pid, 60.0)
            proc.wait(10)
        if not partial.is_file():
            raise LauncherError("the JVM wrote no class archive at the end of the training run: "
                                + log.read_text(errors="replace")[-2000:])
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, target)
    size_mb = target.stat().st_size / 2**20
    print(f"class archive {target} written ({size_mb:.0f} MB) in {time.monotonic() - started:.1f} s", flush=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ts.class_archive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="where to write it (default: next to the frontend jar)")
    args = parser.parse_args(argv)
    try:
        build(args.out)
    except LauncherError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
