"""Test harness: start the real tserve server on free 127.0.0.1 ports, build archives, stop cleanly.

The server is launched with the same command line the `torchserve` CLI builds
(`ts.model_server.build_java_command`), in its own work directory (key_file.json, logs) and its
own process group, so a test never touches another test's files or processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import requests

from ts import model_server
from ts.utils import process_tree
from ts.utils.free_ports import free_port, free_port_block  # noqa: F401 (tests use them from here)

REPO = Path(__file__).resolve().parents[2]
alive = process_tree.process_alive
# Where a Server without a `workdir` makes its own; the repository's conftest.py sets it to a folder
# among pytest's tmp_path folders (kept for the last three runs, like them). None: the system TMPDIR.
WORK_ROOT: Path | None = None
# Soak-like cases (marked `soak`) run a reduced form in `make test` and in full with TSERVE_SOAK=1.
SOAK = os.environ.get("TSERVE_SOAK") == "1"


def soak(full: Any, reduced: Any) -> Any:
    """The size of a soak-like case: `full` with TSERVE_SOAK=1, else `reduced` (what CI runs)."""
    return full if SOAK else reduced


def wait_for(predicate, timeout: float, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll `predicate` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def build_mar(
    export_path: Path,
    model_name: str,
    handler: str | Path,
    *,
    version: str = "1.0",
    serialized_file: str | Path | None = None,
    model_file: str | Path | None = None,
    extra_files: Iterable[str | Path] | None = None,
    config_file: str | Path | None = None,
    config_yaml: str | None = None,
    requirements_file: str | Path | None = None,
    archive_format: str = "default",
    runtime: str = "python",
) -> Path:
    """Build an archive with the project's own archiver (its Python API) and return its path."""
    from model_archiver import ModelArchiver, ModelArchiverConfig

    export_path = Path(export_path)
    export_path.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as cleanup:
        if config_yaml is not None:  # staged only while the archiver copies it into the archive
            staging = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix=f"{model_name}-cfg-")))
            config_file = staging / "model-config.yaml"
            config_file.write_text(config_yaml)
        config = ModelArchiverConfig(
            model_name=model_name,
            handler=str(handler),
            version=version,
            serialized_file=str(serialized_file) if serialized_file else None,
            model_file=str(model_file) if model_file else None,
            extra_files=",".join(str(f) for f in extra_files) if extra_files else None,
            runtime=runtime,
            export_path=str(export_path),
            archive_format=archive_format,
            force=True,
            requirements_file=str(requirements_file) if requirements_file else None,
            config_file=str(config_file) if config_file else None,
        )
        return Path(ModelArchiver.generate_model_archive(config))


def _terminate_with_parent() -> None:
    """In the child before exec: SIGTERM it when the test process dies (a pytest killed by a
    timeout must not leave servers behind; the frontend then stops its own workers)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def cached_venv(venv: Path, pip_args: list[str], what: str, *, env: dict[str, str] | None = None,
                finish: Callable[[Path], None] | None = None) -> Path:
    """A venv with `pip install <pip_args>`, built once and reused (locked against parallel tests).

    `finish(venv)` runs after the install; a venv counts as ready only once it returned.
    Returns the venv's bin directory. `what` names the install in the failure message.
    """
    import fcntl
    import shutil
    import sys

    import pytest

    ready = venv / ".tserve-ready"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return venv / "bin"
        shutil.rmtree(venv, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        pip = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *pip_args]
        for cmd in ([base, "-m", "venv", str(venv)], pip):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
            if proc.returncode != 0:
                pytest.fail(f"cannot install {what} from PyPI into {venv}:\n{proc.stdout}{proc.stderr}")
        if finish is not None:
            finish(venv)
        ready.write_text(" ".join(pip_args))
    return venv / "bin"


def server_config(model_store: Path, *, token_auth: bool = False, model_api: bool = True) -> dict[str, Any]:
    """A config.properties mapping on free 127.0.0.1 ports, so servers in tests never collide."""
    return {
        "inference_address": f"http://127.0.0.1:{free_port()}",
        "management_address": f"http://127.0.0.1:{free_port()}",
        "metrics_address": f"http://127.0.0.1:{free_port()}",
        "grpc_inference_address": "127.0.0.1",
        "grpc_management_address": "127.0.0.1",
        "grpc_inference_port": free_port(),
        "grpc_management_port": free_port(),
        "initial_worker_port": free_port_block(64),
        "initial_distribution_port": free_port_block(64),
        "model_store": str(model_store),
        "disable_token_authorization": "false" if token_auth else "true",
        "enable_model_api": "true" if model_api else "false",
        "default_workers_per_model": 1,
        # Most test models are echo handlers that never import torch: a zygote importing it would
        # cost each server ~2 CPU-seconds for nothing. Workers are still forked from the zygote (the
        # default path); torch handlers import torch after the fork. test_warm_start asks for torch.
        "warm_start_preload": "",
    }


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
    return path


# The JIT tier of test servers (see Server.vmargs).
TEST_JIT = ("-XX:TieredStopAtLevel=1",)


class Server:
    """The real server in a private work directory. Use as a context manager.

    `config` entries are written into the server's config.properties and win over the
    harness defaults (free ports, model store, token auth and model API switches).
    """

    def __init__(
        self,
        model_store: Path,
        config: dict[str, Any] | None = None,
        *,
        token_auth: bool = False,
        model_api: bool = True,
        models: list[str] | None = None,
        env: dict[str, str] | None = None,
        workdir: Path | None = None,
        start_timeout: float = 90.0,
        log_config: Path | None = None,
        vmargs: list[str] | None = None,
        use_ts_config: bool = True,
        no_config_snapshots: bool = False,
    ) -> None:
        self.model_store = Path(model_store)
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="server-", dir=WORK_ROOT))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.workdir / "logs"
        self.tmp_dir = self.workdir / "tmp"
        self.tmp_dir.mkdir(exist_ok=True)
        self.config = server_config(self.model_store, token_auth=token_auth, model_api=model_api)
        self.inference_port = int(self.config["inference_address"].rsplit(":", 1)[1])
        self.management_port = int(self.config["management_address"].rsplit(":", 1)[1])
        self.metrics_port = int(self.config["metrics_address"].rsplit(":", 1)[1])
        self.grpc_inference_port = int(self.config["grpc_inference_port"])
        self.grpc_management_port = int(self.config["grpc_management_port"])
        self.config.update(config or {})
        self.models = models
        self.env = env or {}
        self.start_timeout = start_timeout
        self.log_config = log_config
        # JVM options instead of the launcher's defaults (e.g. a small -Xmx). By default the launcher's
        # plus C1 only: a test server lives seconds, where C2's compiles cost more CPU than they win back
        # (1 500 echo requests: 6-7 -> 3.2-3.8 JVM CPU-seconds); what the server does is the same.
        self.vmargs = vmargs if vmargs is not None else [*model_server.DEFAULT_VMARGS, *TEST_JIT]
        # False: start without -f, as `torchserve --start` without --ts-config (the latest config
        # snapshot in logs/config wins, else the work directory's config.properties)
        self.use_ts_config = use_ts_config
        self.no_config_snapshots = no_config_snapshots
        self.proc: subprocess.Popen | None = None
        self.stdout_path = self.workdir / "stdout.log"

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.workdir / "config.properties"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "server not started"
        return self.proc.pid

    def start(self) -> Server:
        write_config(self.config_path, self.config)
        cmd = model_server.build_java_command(
            model_store=self.model_store, ts_config=self.config_path if self.use_ts_config else None, models=self.models,
            tmp_dir=self.tmp_dir, log_config=self.log_config, vmargs=self.vmargs, no_config_snapshots=self.no_config_snapshots,
        )
        env = {**os.environ, "LOG_LOCATION": str(self.log_dir), "METRICS_LOCATION": str(self.log_dir), "TMPDIR": str(self.tmp_dir)}
        env.pop("TS_CONFIG_FILE", None)
        env.update(self.env)
        with open(self.stdout_path, "wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.workdir,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_terminate_with_parent,
            )
        try:
            wait_for(self._ready, self.start_timeout, interval=0.05, what="'Model server started.'")
        except Exception:
            output = self.output()
            self.stop()
            raise RuntimeError(f"server failed to start:\n{output[-4000:]}") from None
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"server exited with status {self.proc.returncode}:\n{self.output()[-4000:]}")
        return model_server.READY_LINE in self.output()

    def output(self) -> str:
        try:
            return self.stdout_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM the frontend, wait, then SIGKILL its whole process group. Returns its exit code."""
        if self.proc is None:
            return None
        tree = process_tree.descendants(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        for pid in [self.proc.pid, *tree]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        code = self.proc.wait(10)
        return code

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- clients ---------------------------------------------------------------------------

    @property
    def inference_url(self) -> str:
        return f"http://127.0.0.1:{self.inference_port}"

    @property
    def management_url(self) -> str:
        return f"http://127.0.0.1:{self.management_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    def keys(self) -> dict[str, Any]:
        """The token file the server wrote (token auth on)."""
        return json.loads((self.workdir / "key_file.json").read_text())

    def register(self, url: str, timeout: float = 120.0, **params: Any) -> requests.Response:
        params = {"url": url, "synchronous": "true", **params}
        return requests.post(f"{self.management_url}/models", params=params, timeout=timeout)

    def predict(self, model: str, data: bytes | str | None = None, version: str | None = None, **kw: Any) -> requests.Response:
        path = f"/predictions/{model}" + (f"/{version}" if version else "")
        return requests.post(self.inference_url + path, data=data, timeout=kw.pop("timeout", 60), **kw)

    def logs(self, name: str = "ts_log.log") -> str:
        try:
            return (self.log_dir / name).read_text(errors="replace")
        except OSError:
            return ""


def promtool_problems(metrics_text: str) -> list[str]:
    """What `promtool check metrics` says about a /metrics scrape, one line a problem (lint warnings;
    a text that does not parse fails the test). promtool is Debian's prometheus package (make install)."""
    import pytest

    path = subprocess.run(["sh", "-c", "command -v promtool"], capture_output=True, text=True).stdout.strip()
    if not path:
        if os.path.exists("/usr/bin/apt-get"):
            pytest.fail("promtool is missing: `make install` installs Debian's prometheus package, which ships it")
        pytest.skip("promtool is missing and this machine has no apt-get to install Debian's prometheus package")
    check = subprocess.run([path, "check", "metrics"], input=metrics_text, capture_output=True, text=True, timeout=60)
    problems = [ln for ln in (check.stdout + check.stderr).splitlines() if ln.strip()]
    assert check.returncode in (0, 3), problems  # 1: the text did not parse
    return problems
