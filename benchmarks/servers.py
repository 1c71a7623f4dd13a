"""Start and stop tserve and TorchServe 0.12 with the same settings, each in a private directory.

Both are launched through their own ``torchserve --start --foreground`` CLI with token auth off
and the model API on, on free 127.0.0.1 ports, with a private TMPDIR (pid file, worker
sockets) and LOG_LOCATION, so neither collides with another server on the machine.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import procstat
from ts.utils.free_ports import free_port, free_port_block

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / ".bench"
BENCH_VENV = BENCH / "venv"

QUIET_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<!-- TorchServe at its best: warnings and errors to files only, nothing copied to stdout. -->
<Configuration>
  <Appenders>
    <File name="ts_log" fileName="${env:LOG_LOCATION:-logs}/ts_log.log">
      <PatternLayout pattern="%d{ISO8601} [%-5p] %t %c - %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="ACCESS_LOG" level="warn" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="MODEL_LOG" level="warn" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="MODEL_METRICS" level="warn" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="TS_METRICS" level="warn" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="io.netty" level="error" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="org.apache" level="off"/>
    <Logger name="org.pytorch.serve" level="warn" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Root level="warn"><AppenderRef ref="ts_log"/></Root>
  </Loggers>
</Configuration>
"""


class ServerError(RuntimeError):
    """A server did not start, register a model or answer."""


def http_request(port: int, method: str, path: str, body: bytes = b"",
                 timeout: float = 60.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body or None,
                     headers={"Content-Type": "application/octet-stream"} if body else {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@dataclass
class ServerKind:
    """How to launch one server flavour."""

    name: str  # tserve | torchserve | torchserve-quiet
    cli: Path
    env: dict[str, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    drop_env: tuple[str, ...] = ()
    extra_config: dict[str, str] = field(default_factory=dict)


SNAPSHOT = BENCH / "snapshot"
SNAPSHOT_TAKEN = SNAPSHOT / "TAKEN"  # written last: the snapshot is complete and this old
# A small initial heap that SerialGC shrinks back after load, a 128 MiB cap, one Netty arena
# with 4 MiB chunks. (C1-only, -XX:TieredStopAtLevel=1, measured 10-25 % slower: left out.)
TUNED_VMARGS = ("-XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError -Xms16m -Xmx128m "
                "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 "
                "-Dio.netty.allocator.numDirectArenas=1 -Dio.netty.allocator.numHeapArenas=1 "
                "-Dio.netty.allocator.maxOrder=9")


def snapshot_tserve(attempts: int = 5) -> dict[str, str]:
    """Copy ts/ (with the frontend jar) and model_archiver/ to .bench/snapshot.

    tserve then runs from the copy (PYTHONPATH wins over the editable install when the working
    directory is not the repository), so a jar rebuilt by someone else during a run cannot pull
    classes out from under a running JVM. Returns what was copied, for the results.
    """
    jar = REPO / "ts" / "frontend" / "tserve-frontend.jar"
    if not jar.is_file():
        raise ServerError(f"{jar} is missing: build it with 'make install' "
                          "(or 'gradle --no-daemon packageJar')")
    for attempt in range(attempts):
        if SNAPSHOT.exists():
            shutil.rmtree(SNAPSHOT)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(REPO / "ts", SNAPSHOT / "ts", ignore=ignore)
        shutil.copytree(REPO / "model-archiver" / "model_archiver", SNAPSHOT / "model_archiver",
                        ignore=ignore)
        copied = SNAPSHOT / "ts" / "frontend" / "tserve-frontend.jar"
        try:
            with zipfile.ZipFile(copied) as zf:
                zf.getinfo("META-INF/MANIFEST.MF")
            break
        except (zipfile.BadZipFile, KeyError):
            if attempt == attempts - 1:
                raise ServerError(f"{jar} is not a complete jar (being rebuilt?)") from None
            time.sleep(5)  # the jar is being written right now: copy it again a bit later
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()
    SNAPSHOT_TAKEN.write_text(f"{head}\n")
    return {"git_head": head, "jar_mtime": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(jar.stat().st_mtime)), "jar_bytes": str(jar.stat().st_size)}


def stale_snapshot() -> str | None:
    """Why ``.bench/snapshot`` does not hold the working tree's ``ts`` (a file changed after the
    copy, or a copy older than this check), or None. Scripts that start servers without
    ``snapshot_tserve()`` (run.sh calls it) serve whatever copy an earlier run left."""
    if not SNAPSHOT_TAKEN.is_file():
        return f"{SNAPSHOT} predates the snapshot check or is incomplete"
    taken = SNAPSHOT_TAKEN.stat().st_mtime
    for path in (REPO / "ts").rglob("*"):
        if "__pycache__" not in path.parts and path.is_file() and path.stat().st_mtime > taken:
            return f"{path.relative_to(REPO)} changed after {SNAPSHOT} was taken"
    return None


def kinds() -> dict[str, ServerKind]:
    quiet = BENCH / "log4j2-quiet.xml"
    quiet.parent.mkdir(parents=True, exist_ok=True)
    quiet.write_text(QUIET_LOG4J2)
    if (SNAPSHOT / "ts" / "frontend" / "tserve-frontend.jar").is_file():
        tserve_path = str(SNAPSHOT)
        why = stale_snapshot()
        if why:
            print(f"WARNING: tserve runs from {SNAPSHOT}, not from the working tree: {why}; "
                  "refresh it with benchmarks.servers.snapshot_tserve() (run.sh does)", file=sys.stderr)
    else:
        tserve_path = f"{REPO}:{REPO / 'model-archiver'}"
    ts_bin = BENCH_VENV / "bin" / "torchserve"
    # TorchServe must never see tserve's `ts` package: no PYTHONPATH, cwd outside the repo.
    drop = ("PYTHONPATH", "TS_CONFIG_FILE")
    tserve_cli = REPO / ".venv" / "bin" / "torchserve"
    return {
        "tserve": ServerKind("tserve", tserve_cli,
                             env={"PYTHONPATH": tserve_path}, drop_env=("TS_CONFIG_FILE",)),
        # tserve with TorchServe-quiet's own log4j2.xml (no access or metric lines): the same logging
        # as the peer it is compared with, so the request path is compared and not the log lines.
        "tserve-quiet": ServerKind("tserve-quiet", tserve_cli, env={"PYTHONPATH": tserve_path},
                                   drop_env=("TS_CONFIG_FILE",), extra_args=["--log-config", str(quiet)]),
        # The JVM flags docs/benchmarks.md suggests for the launcher's defaults (vmargs key).
        "tserve-tuned": ServerKind("tserve-tuned", tserve_cli, env={"PYTHONPATH": tserve_path},
                                   drop_env=("TS_CONFIG_FILE",),
                                   extra_config={"vmargs": TUNED_VMARGS}),
        # Java's NIO instead of Linux's native epoll transport (use_native_io=false): the transport, side by side.
        "tserve-nio": ServerKind("tserve-nio", tserve_cli, env={"PYTHONPATH": tserve_path},
                                 drop_env=("TS_CONFIG_FILE",), extra_config={"use_native_io": "false"}),
        # Workers started cold (no zygote): what warm starts change, measured side by side.
        "tserve-cold": ServerKind("tserve-cold", tserve_cli, env={"PYTHONPATH": tserve_path},
                                  drop_env=("TS_CONFIG_FILE",), extra_config={"warm_worker_start": "false"}),
        **_base_tree_kind(tserve_cli),
        "torchserve": ServerKind("torchserve", ts_bin, drop_env=drop),
        "torchserve-quiet": ServerKind("torchserve-quiet", ts_bin, drop_env=drop,
                                       extra_args=["--log-config", str(quiet)]),
    }


def _base_tree_kind(tserve_cli: Path) -> dict[str, ServerKind]:
    """``tserve-base``: tserve from another checkout (``TSERVE_BASE_TREE``, its jar built), for a
    same-run A/B of two trees: ``--servers tserve,tserve-base,...``. Absent without the variable."""
    tree = os.environ.get("TSERVE_BASE_TREE")
    if not tree:
        return {}
    base = Path(tree).resolve()
    if not (base / "ts" / "frontend" / "tserve-frontend.jar").is_file():
        raise ServerError(f"TSERVE_BASE_TREE={base}: no ts/frontend/tserve-frontend.jar there; build it first "
                          "(gradle --no-daemon -q packageJar in that tree)")
    return {"tserve-base": ServerKind("tserve-base", tserve_cli, env={"PYTHONPATH": f"{base}:{base / 'model-archiver'}"},
                                      drop_env=("TS_CONFIG_FILE",))}


def stop_tree(proc: subprocess.Popen, tree: list[procstat.ProcInfo], term: list[int],
              timeout: float) -> None:
    """SIGTERM ``term``, wait for ``proc``, then SIGKILL every survivor of ``tree`` by pid."""
    for pid in term:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    for info in tree:
        # Only a process that is still the one we started (same command line): no pid reuse.
        if info.cmdline and procstat.cmdline(info.pid) == info.cmdline:
            try:
                os.kill(info.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


class Server:
    """One running server; use as a context manager."""

    def __init__(self, kind: ServerKind, model_store: Path, models: list[str] | None = None,
                 config: dict[str, str] | None = None, vmargs: str | None = None,
                 run_dir: Path | None = None) -> None:
        self.kind = kind
        self.model_store = model_store
        self.models = models or []
        self.inference_port = free_port()
        self.management_port = free_port()
        self.metrics_port = free_port()
        stamp = f"{kind.name}-{os.getpid()}-{time.monotonic_ns()}"
        self.dir = run_dir or BENCH / "runs" / stamp
        self.dir.mkdir(parents=True, exist_ok=True)
        cfg = {
            "inference_address": f"http://127.0.0.1:{self.inference_port}",
            "management_address": f"http://127.0.0.1:{self.management_port}",
            "metrics_address": f"http://127.0.0.1:{self.metrics_port}",
            "grpc_inference_address": "127.0.0.1",
            "grpc_management_address": "127.0.0.1",
            "grpc_inference_port": str(free_port()),
            "grpc_management_port": str(free_port()),
            "initial_worker_port": str(free_port_block(32)),
            "model_store": str(model_store),
            "default_workers_per_model": "1",
            "job_queue_size": "1000",
            "disable_system_metrics": "true",
            "disable_token_authorization": "true",
            "enable_model_api": "true",
        }
        cfg.update(kind.extra_config)
        cfg.update(config or {})
        if vmargs:
            cfg["vmargs"] = vmargs
        self.config_path = self.dir / "config.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        tmp = self.dir / "tmp"
        logs = self.dir / "logs"
        tmp.mkdir(exist_ok=True)
        logs.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in self.kind.drop_env}
        env.update(self.kind.env)
        env.update({"TMPDIR": str(tmp), "TEMP": str(tmp), "LOG_LOCATION": str(logs),
                    "METRICS_LOCATION": str(logs), "HF_HUB_OFFLINE": "1"})
        cmd = [str(self.kind.cli), "--start", "--foreground", "--model-store",
               str(self.model_store), "--ts-config", str(self.config_path), "--ncs",
               "--disable-token-auth", "--enable-model-api", *self.kind.extra_args]
        if self.models:
            cmd += ["--models", *self.models]
        self.stdout_path = self.dir / "stdout.log"
        self.started_at = time.perf_counter()
        with open(self.stdout_path, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=self.dir, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def wait_ready(self, timeout: float = 120.0) -> float:
        """Poll GET /ping until it answers 200; seconds since start."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                status, _ = http_request(self.inference_port, "GET", "/ping", timeout=2)
                if status == 200:
                    return time.perf_counter() - self.started_at
            except OSError:
                pass
            time.sleep(0.02)
        raise ServerError(f"{self.kind.name} did not answer /ping within {timeout:.0f}s; "
                          f"see {self.stdout_path}")

    def wait_prediction(self, model: str, body: bytes, timeout: float = 120.0) -> float:
        """Poll POST /predictions/<model> until one succeeds; seconds since start."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                status, data = http_request(self.inference_port, "POST",
                                            f"/predictions/{model}", body, timeout=5)
                if status == 200:
                    return time.perf_counter() - self.started_at
                last = f"HTTP {status} {data[:200]!r}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.01)
        raise ServerError(f"{self.kind.name}: no successful prediction of {model} within "
                          f"{timeout:.0f}s (last: {last}); see {self.stdout_path}")

    def register(self, archive: str, name: str, batch_size: int = 1, delay_ms: int = 100,
                 workers: int = 1, timeout: float = 180.0) -> None:
        query = urllib.parse.urlencode({
            "url": archive, "model_name": name, "batch_size": batch_size,
            "max_batch_delay": delay_ms, "initial_workers": workers, "synchronous": "true",
        })
        status, data = http_request(self.management_port, "POST", f"/models?{query}",
                                    timeout=timeout)
        if status != 200:
            raise ServerError(f"{self.kind.name}: registering {name} failed: HTTP {status} "
                              f"{data[:300]!r}")

    def unregister(self, name: str) -> None:
        http_request(self.management_port, "DELETE", f"/models/{name}", timeout=60)

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            tail = self.stdout_path.read_text(errors="replace")[-2000:]
            raise ServerError(f"{self.kind.name} exited with {self.proc.returncode}:\n{tail}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the frontend JVM (it stops its workers), then SIGKILL what is left, by pid."""
        if self.proc is not None:
            tree = procstat.process_tree(self.proc.pid)
            java = [p.pid for p in tree if procstat.is_frontend(p)]
            stop_tree(self.proc, tree, java or [self.proc.pid], timeout)
            self.proc = None

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LitServeServer:
    """LitServe 0.2.19 running ``litserve_pipeline.py`` (pipeline scenario only)."""

    def __init__(self, preprocess_ms: float, inference_ms: float, batch_size: int,
                 delay_ms: int) -> None:
        self.port = free_port()
        self.args = [str(preprocess_ms), str(inference_ms), str(batch_size), str(delay_ms)]
        self.dir = BENCH / "runs" / f"litserve-{os.getpid()}-{time.monotonic_ns()}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        script = Path(__file__).resolve().parent / "litserve_pipeline.py"
        self.stdout_path = self.dir / "stdout.log"
        with open(self.stdout_path, "wb") as out:
            self.proc = subprocess.Popen(
                [str(BENCH_VENV / "bin" / "python"), str(script), str(self.port), *self.args],
                cwd=self.dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"LitServe exited: {self.stdout_path.read_text()[-2000:]}")
            try:
                if http_request(self.port, "GET", "/health", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise ServerError(f"LitServe did not answer /health within {timeout:.0f}s")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None:
            stop_tree(self.proc, procstat.process_tree(self.proc.pid), [self.proc.pid], 20)
            self.proc = None

    def __enter__(self) -> LitServeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
