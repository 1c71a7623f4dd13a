"""Starts a worker warm: asks the zygote (ts/warmstart/zygote.py) to fork one, and stands in for it.

    python -I -S ts/warmstart/launch.py --zygote DIR/zygote.sock -- WORKER_ARGS...

The frontend runs this instead of ``python -m ts.model_service_worker WORKER_ARGS``. It imports
only the standard library (starts in ~20 ms), hands the zygote its stdin/stdout/stderr and one
end of a lifeline pipe, relays SIGTERM/SIGINT to the worker and exits with the worker's status.
When no zygote answers, it becomes the worker the cold way (exec), so a missing or dead zygote
costs speed, never a worker.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import sys
import time
from typing import Any, NoReturn

CONNECT_TIMEOUT_S = 2.0
COLD_START_ENV = "TS_ZYGOTE_FALLBACK_PYTHON"  # the interpreter for a cold start (default: this one)


def cold_start(worker_args: list[str], why: str) -> NoReturn:
    python = os.environ.get(COLD_START_ENV) or sys.executable
    print(f"warm start unavailable ({why}); starting the worker cold", file=sys.stderr, flush=True)
    os.execv(python, [python, "-m", "ts.model_service_worker", *worker_args])


def read_line(conn: socket.socket, buf: bytearray) -> dict[str, Any] | None:
    while b"\n" not in buf:
        try:
            data = conn.recv(4096)
        except InterruptedError:
            continue
        if not data:
            return None
        buf += data
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    message: dict[str, Any] = json.loads(line)
    return message


def wait_gone(pid: int) -> None:
    """The zygote died before telling us the worker's exit: watch the pid instead."""
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(0.1)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "--zygote" or argv[2] != "--":
        print("usage: ts/warmstart/launch.py --zygote SOCKET -- WORKER_ARGS...", file=sys.stderr)
        return 2
    path, worker_args = argv[1], argv[3:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(CONNECT_TIMEOUT_S)
    try:
        conn.connect(path)
    except OSError as exc:
        conn.close()
        cold_start(worker_args, f"zygote socket {path}: {exc.strerror or exc}")
    lifeline_r, lifeline_w = os.pipe()
    request = json.dumps({"argv": worker_args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode() + b"\n"
    try:
        conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2, lifeline_r]))])
        os.close(lifeline_r)
        conn.settimeout(None)
        buf = bytearray()
        answer = read_line(conn, buf)
    except OSError as exc:
        answer = None
        why = str(exc)
    else:
        why = "the zygote closed the connection"
    if not answer or "pid" not in answer:
        conn.close()
        os.close(lifeline_w)
        cold_start(worker_args, why)
    pid = int(answer["pid"])

    def relay(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, relay)
    done = read_line(conn, buf)
    if done is None:
        wait_gone(pid)
        return 1
    code = int(done.get("exit", 1))
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)
