"""The `torchserve` command: starts, stops and supervises the Java frontend.

Same flags and messages as TorchServe 0.12's launcher, so scripts written for it keep working.
The frontend runs detached (its output goes to `<log dir>/ts_stdout.log`, which `--start`
follows until the server says `Model server started.`; with `compatibility=torchserve-0.12` in
--ts-config it keeps copying it to the launcher's stdout afterwards, as TorchServe's does) or in the
foreground (`--foreground`, the JVM writes to the launcher's stdout).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ts
from ts.arg_parser import ArgParser
from ts.generated.config_defaults import CONFIG_DEFAULTS
from ts.utils.java import LauncherError, class_archive_options, find_java, frontend_jar
from ts.utils.process_tree import process_alive, stop_process_tree
from ts.version import version_line
from ts.warmstart import spawn as zygote_spawn

MAIN_CLASS = "org.tserve.ModelServer"
READY_LINE = "Model server started."
# config.properties `compatibility` value that asks for TorchServe 0.12's behaviour (docs/compatibility.md)
COMPATIBILITY_TORCHSERVE = "torchserve-0.12"
MODEL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.]*$")
DEFAULT_VMARGS = ("-XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError -Xms16m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 "
                  "-Dio.netty.allocator.numDirectArenas=1 -Dio.netty.allocator.numHeapArenas=1 "
                  "-Dio.netty.allocator.maxOrder=9").split()  # why each: docs/performance.md
START_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 60.0


def server_home() -> Path:
    """The directory that contains the `ts` package (TorchServe's `model_server_home`)."""
    return Path(ts.__file__).resolve().parent.parent


def pid_file() -> Path:
    return Path(tempfile.gettempdir()) / ".model_server.pid"


def log_dir() -> Path:
    return Path(os.environ.get("LOG_LOCATION", "logs")).resolve()


def read_properties(path: Path) -> dict[str, str]:
    """Minimal Java .properties reader: enough for the keys the launcher itself needs."""
    props: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = _split_property(line)
        if sep:
            props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str, str]:
    match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
    if not match:
        return line, "", ""
    return match.group(1), "=", match.group(2).strip()


def validate_models(values: list[str]) -> list[str]:
    """Check each `--models` value: `all`, `name=path`, or a bare path/URL."""
    for value in values:
        if value == "all":
            continue
        name, sep, url = value.partition("=")
        if sep:
            if not MODEL_NAME_RE.match(name) or not url:
                raise LauncherError(
                    f"Invalid --models value '{value}': use NAME=ARCHIVE (NAME starts with a letter or digit and holds only "
                    "letters, digits, '_', '-', '.'), a bare ARCHIVE, or 'all'."
                )
        elif not value.strip():
            raise LauncherError("Invalid --models value '': give NAME=ARCHIVE, ARCHIVE or 'all'.")
    return values


def build_java_command(
    *,
    model_store: Path | None,
    ts_config: Path | None = None,
    models: list[str] | None = None,
    no_config_snapshots: bool = False,
    disable_token_auth: bool = False,
    enable_model_api: bool = False,
    vmargs: list[str] | None = None,
    java: str | None = None,
    tmp_dir: Path | None = None,
    log_config: Path | None = None,
    member_of: str | None = None,
    workflow_store: Path | None = None,
) -> list[str]:
    """The frontend's command line; the test harness uses this same function."""
    java = java or find_java()
    jar = frontend_jar()
    if not jar.is_file():
        raise LauncherError(f"The frontend jar is missing at {jar}: build it with 'make install' (or 'gradle --offline packageJar').")
    options = list(vmargs if vmargs is not None else DEFAULT_VMARGS)
    cmd = [java, *options, *class_archive_options(options)]
    cmd += [f"-Dmodel_server_home={server_home()}", f"-Djava.io.tmpdir={tmp_dir or tempfile.gettempdir()}"]
    if log_config is not None:  # as TorchServe's launcher: after vmargs, so --log-config wins over theirs
        cmd.append(f"-Dlog4j.configurationFile={Path(log_config).resolve().as_uri()}")
    cmd += ["-cp", str(jar), MAIN_CLASS, "--python", sys.executable]
    if ts_config is not None:
        cmd += ["-f", str(ts_config)]
    if model_store is not None:
        cmd += ["-s", str(model_store)]
    if workflow_store is not None:
        cmd += ["-w", str(workflow_store)]
    for model in models or []:
        cmd += ["-m", model]
    if no_config_snapshots:
        cmd.append("-ncs")
    if disable_token_auth:
        cmd.append("-dt")
    if enable_model_api:
        cmd.append("-mapi")
    if member_of:
        cmd += ["--member-of", member_of]
    return cmd


def running_pid() -> int | None:
    """The pid in the pid file, if that process is alive and is a tserve frontend."""
    path = pid_file()
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return None
    return pid if MAIN_CLASS in cmdline else None


def _parser() -> argparse.ArgumentParser:
    return ArgParser.ts_parser()


def _resolve_start(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """Validate the start options and return the frontend command and the config it read."""
    if args.plugins_path:
        raise LauncherError("--plugins-path: Java frontend plugins are not supported by tserve; remove the option.")
    config_path = os.environ.get("TS_CONFIG_FILE") or args.ts_config
    props: dict[str, str] = {}
    ts_config = None
    if config_path:
        ts_config = Path(config_path).resolve()
        if not ts_config.is_file():
            raise LauncherError(f"--ts-config {config_path}: file not found.")
        props = read_properties(ts_config)
    if args.log_config and not Path(args.log_config).is_file():
        raise LauncherError(f"--log-config {args.log_config}: file not found.")
    store = args.model_store or props.get("model_store")
    if not store:
        raise LauncherError("Missing --model-store: give the directory that holds your .mar files (or set model_store in --ts-config).")
    model_store = Path(store).resolve()
    if not model_store.is_dir():
        raise LauncherError(f"--model-store {store}: directory not found; create it or point to the folder holding your .mar files.")
    workflow_store = None
    if args.workflow_store:
        workflow_store = Path(args.workflow_store).resolve()
        if not workflow_store.is_dir():
            raise LauncherError(f"--workflow-store {args.workflow_store}: directory not found; create it or point to the folder "
                                "holding your .war files.")
    models = validate_models(args.models or [])
    vmargs = props["vmargs"].split() if props.get("vmargs") else None
    cmd = build_java_command(
        model_store=model_store,
        ts_config=ts_config,
        models=models,
        no_config_snapshots=args.ncs,
        disable_token_auth=args.disable_token_auth,
        enable_model_api=args.enable_model_api,
        vmargs=vmargs,
        log_config=Path(args.log_config) if args.log_config else None,
        member_of=args.member_of,
        workflow_store=workflow_store,
    )
    return cmd, props


def start(args: argparse.Namespace) -> int:
    pid = running_pid()
    if pid is not None:
        print("TorchServe is already running, please use torchserve --stop to stop TorchServe.")
        return 1
    cmd, props = _resolve_start(args)
    logs = log_dir()
    logs.mkdir(parents=True, exist_ok=True)
    home = os.environ.get("TS_MODEL_SERVER_HOME") or str(server_home())
    if args.foreground:
        zygote = zygote_spawn.spawn(props, home, None, None)
        proc = _start_frontend(cmd, zygote)
        pid_file().write_text(str(proc.pid))

        def forward(signum: int, _frame: object) -> None:
            proc.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        code = proc.wait()
        pid_file().unlink(missing_ok=True)
        return code
    stdout_path = logs / "ts_stdout.log"
    with open(stdout_path, "ab") as out:
        offset = out.tell()
        zygote = zygote_spawn.spawn(props, home, None, out.fileno())
        proc = _start_frontend(cmd, zygote, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    pid_file().write_text(str(proc.pid))
    ready_at = _follow_until_ready(proc, stdout_path, offset, START_TIMEOUT_S)
    if ready_at is None:
        pid_file().unlink(missing_ok=True)
        print(f"TorchServe failed to start (exit status {proc.returncode}); see {stdout_path}.", file=sys.stderr)
        return 1
    if torchserve_compatible(props if props else _implicit_config(args.ncs)):
        _keep_streaming(proc.pid, stdout_path, ready_at)
    return 0


SNAPSHOT_NAME = re.compile(r"^\d{17}-(startup|snapshot|shutdown)\.cfg$")


def _implicit_config(no_snapshots: bool) -> dict[str, str]:
    """Without --ts-config the frontend reads the latest config snapshot, else ./config.properties
    (config.ConfigManager): the launcher reads the switch from the same file."""
    snapshots = [] if no_snapshots else sorted(
        p for p in (log_dir() / "config").glob("*.cfg") if SNAPSHOT_NAME.match(p.name) and p.is_file())
    chosen = snapshots[-1] if snapshots else Path("config.properties")
    return read_properties(chosen) if chosen.is_file() else {}


def torchserve_compatible(props: dict[str, str]) -> bool:
    """The launcher's reading of the compatibility switch (the frontend's is config.Compatibility)."""
    return props.get("compatibility", CONFIG_DEFAULTS["compatibility"]).strip().lower() == COMPATIBILITY_TORCHSERVE


def _keep_streaming(pid: int, stdout_path: Path, offset: int) -> None:
    """TorchServe's ``--start`` leaves the server writing its and its workers' log lines to the
    launching process's stdout (scripts read tracebacks from it): a detached child of the launcher
    keeps copying ts_stdout.log there until the server exits; the launcher itself returns now."""
    sys.stdout.flush()
    if os.fork() != 0:
        return
    try:
        os.setsid()
        with open(stdout_path, "rb") as out:
            out.seek(offset)
            while True:
                chunk = out.read(65536)
                if chunk:
                    os.write(1, chunk)
                elif not process_alive(pid):
                    break
                else:
                    time.sleep(0.05)
    except OSError:
        pass  # the reader of our stdout went away
    finally:
        os._exit(0)


def _start_frontend(cmd: list[str], zygote: zygote_spawn.SpawnedZygote | None, **popen: Any) -> subprocess.Popen[bytes]:
    """Starts the JVM; with a zygote the launcher started, the JVM adopts it and holds its lifeline."""
    if zygote is None:
        return subprocess.Popen(cmd, **popen)
    try:
        proc = subprocess.Popen([*cmd, *zygote.java_args()], pass_fds=(zygote.lifeline,), **popen)
    except BaseException:
        zygote.abandon()
        raise
    zygote.handed_over()
    return proc


def _follow_until_ready(proc: subprocess.Popen[bytes], stdout_path: Path, offset: int, timeout: float) -> int | None:
    """Echo what this start appends to the frontend's output until it is ready (the file offset
    after the ready line) or exits (None)."""
    deadline = time.monotonic() + timeout
    with open(stdout_path, "rb") as out:
        out.seek(offset)
        pending = b""
        while time.monotonic() < deadline:
            chunk = out.readline()
            if chunk:
                pending += chunk
                if not chunk.endswith(b"\n"):
                    continue
                line = pending.decode(errors="replace")
                pending = b""
                print(line, end="", flush=True)
                if READY_LINE in line:
                    return out.tell()
                continue
            if proc.poll() is not None:
                rest = (pending + out.read()).decode(errors="replace")
                if rest:
                    print(rest, end="")
                return out.tell() if READY_LINE in rest else None
            time.sleep(0.05)
    raise LauncherError(f"The server did not report '{READY_LINE}' within {timeout:.0f} s; see {stdout_path}.")


def server_key_file(pid: int) -> Path | None:
    """The token file the frontend wrote: `key_file.json` in its working directory."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")) / "key_file.json"
    except OSError:
        return None


def stop() -> int:
    pid = running_pid()
    if pid is None:
        print("TorchServe is not currently running.")
        pid_file().unlink(missing_ok=True)
        return 0
    print(f"Stopping TorchServe (pid {pid})...", flush=True)
    key_files = {p for p in (Path("key_file.json").resolve(), server_key_file(pid)) if p is not None}
    outcome = stop_process_tree(pid, STOP_TIMEOUT_S)
    pid_file().unlink(missing_ok=True)
    for key_file in key_files:  # TorchServe deletes key_file.json on --stop
        key_file.unlink(missing_ok=True)
    print(outcome.describe("TorchServe"))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.version:
            print(version_line())
            return 0
        if args.stop:
            return stop()
        return start(args)
    except LauncherError as err:
        print(f"torchserve: error: {err}", file=sys.stderr)
        return 1


def start_cli() -> None:
    """Console-script entry point (`torchserve`)."""
    sys.exit(main())


if __name__ == "__main__":
    start_cli()
