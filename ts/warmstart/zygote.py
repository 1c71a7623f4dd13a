"""Warm worker starts: a template process that imports torch once and forks workers from there.

    python -m ts.warmstart.zygote --socket DIR/zygote.sock --preload torch

Starting a worker costs mostly ``import torch`` (1.5 s and more here); a fork of a process that
has already imported it costs milliseconds, and the forked workers share those pages
copy-on-write. The frontend starts one zygote per server; each plain worker is then started
as ``ts/warmstart/launch.py``, a stdlib-only stand-in that asks the zygote for a fork, hands it its
stdout/stderr, relays signals and exits with the worker's status — so the frontend keeps a
process of its own to watch and kill, as with a cold start (docs/performance.md, "Warm starts").

Fork safety: the zygote runs no threads of its own and never touches CUDA, so a child
initialises CUDA (and OpenMP's pool) itself, after CUDA_VISIBLE_DEVICES is set. A child gets
the environment, working directory and ``sys.path`` a cold start would have, fresh RNG seeds,
and dies with its launcher (the lifeline pipe), so killing the launcher kills the worker.
"""

from __future__ import annotations

import argparse
import array
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
from typing import Any

MAX_REQUEST = 1 << 20  # one fork request: argv, cwd and the environment, as JSON
FDS_PER_REQUEST = 4  # stdin, stdout, stderr, the launcher's lifeline
WARM_ENV = "TS_WARM_START"  # set in forked workers (their log says so)
# tserve's own worker modules, imported after warm_start_preload: a forked worker then needs no
# import of its own before it listens and loads (they read no environment at import time)
WORKER_MODULES = ("ts.model_service_worker", "ts.model_loader", "ts.pipeline.loader", "ts.pipeline.sync",
                  "ts.service")
# imported too when torch is preloaded: BaseHandler, the default handler of most archives
TORCH_WORKER_MODULES = ("ts.torch_handler.base_handler",)


def recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One JSON line with the launcher's file descriptors attached (SCM_RIGHTS)."""
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        msg, anc, _flags, _addr = conn.recvmsg(65536, socket.CMSG_LEN(FDS_PER_REQUEST * fds.itemsize))
        if not msg:
            raise ConnectionError("launcher closed the connection before its request")
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        data += msg
        if len(data) > MAX_REQUEST:
            raise ValueError("fork request over 1 MiB")
    return json.loads(data), list(fds)


class Zygote:
    def __init__(self, path: str, exit_on_stdin_eof: bool = False) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.children: dict[int, socket.socket] = {}  # worker pid -> its launcher's connection
        self.sel = selectors.DefaultSelector()
        # SIGCHLD wakes the loop through a pipe: no thread, so forking stays safe
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "reap")
        if exit_on_stdin_eof:  # started by the launcher: stdin's writer is the frontend (ts/warmstart/spawn.py)
            self.sel.register(0, selectors.EVENT_READ, "lifeline")

    def serve(self) -> None:
        while True:
            for key, _ in self.sel.select():
                if key.data == "accept":
                    self._accept()
                elif key.data == "lifeline":
                    if not os.read(0, 64):
                        print("zygote: the frontend is gone; exiting", flush=True)
                        return
                else:
                    self._reap()

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(5)
        try:
            request, fds = recv_request(conn)
        except (OSError, ValueError) as exc:
            print(f"zygote: bad fork request: {exc}", flush=True)
            conn.close()
            return
        if len(fds) != FDS_PER_REQUEST:
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self._become_worker(request, fds, conn)  # never returns
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        try:
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        except OSError:
            pass  # the launcher is gone: the lifeline ends the child

    def _reap(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            try:
                conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
            except OSError:
                pass
            conn.close()

    def _become_worker(self, request: dict[str, Any], fds: list[int], conn: socket.socket) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            self.sel.close()
            self.listener.close()
            conn.close()
            for other in self.children.values():
                other.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            stdin, stdout, stderr, lifeline = fds
            for src, dst in ((stdin, 0), (stdout, 1), (stderr, 2)):
                os.dup2(src, dst)
                os.close(src)
            threading.Thread(target=_die_with_launcher, args=(lifeline,), name="lifeline", daemon=True).start()
            _forget_parents_multiprocessing_tempdir()
            code = run_worker(request)
        except SystemExit as exc:  # argparse and friends: exit as the cold worker would have
            if isinstance(exc.code, int) or exc.code is None:
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr, flush=True)
        except BaseException as exc:  # noqa: BLE001 - a child must never return into the zygote's loop
            print(f"zygote child: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            try:
                from ts.model_service_worker import remove_multiprocessing_tempdir

                remove_multiprocessing_tempdir()   # os._exit skips multiprocessing's atexit hook
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)


def _forget_parents_multiprocessing_tempdir() -> None:
    """A forked child inherits the zygote's ``pymp-*`` folder name, if it has one: the child makes
    its own (in its own TMPDIR) and removes only that one when it exits."""
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        process.current_process()._config.pop("tempdir", None)


def _die_with_launcher(lifeline: int) -> None:
    """The launcher holds the pipe's other end: EOF means it died (or was killed), so must we."""
    while True:
        try:
            if not os.read(lifeline, 64):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    os._exit(137)


def run_worker(request: dict[str, Any]) -> int:
    """What ``python -m ts.model_service_worker ARGS`` would do, in this already-warm process."""
    env = {str(k): str(v) for k, v in request["env"].items()}
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(env)
    os.environ[WARM_ENV] = "1"
    import tempfile

    tempfile.tempdir = None  # the zygote may have cached its own TMPDIR: use the worker's
    # sys.path as a cold `python -m` start builds it: the working directory, then PYTHONPATH
    entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [os.getcwd(), *entries]
    importlib.invalidate_caches()
    _reseed()
    # The zygote's objects stay frozen (gc.freeze): a collection that walked them would write to
    # every page they live on — 0.5 s and ~40 MB of private copies per worker, measured — for
    # module state that lives as long as the worker anyway (the gc module docs' fork recipe).
    sys.argv = ["ts.model_service_worker", *request["argv"]]
    from ts import model_service_worker

    return model_service_worker.main(list(request["argv"]))


def _reseed() -> None:
    """Each worker gets its own random streams, as a cold start would (fork copies the zygote's)."""
    import random

    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()


def preload(modules: list[str]) -> list[str]:
    """Imports what workers will need; a module that fails to import is skipped (and named)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - the zygote still serves, just less warm
            failed.append(f"{name} ({type(exc).__name__}: {exc})")
    gc.collect()
    gc.freeze()  # keeps the imported objects' pages shared after fork (no refcount-free GC writes)
    return failed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ts.warmstart.zygote", description="tserve warm-start template process")
    p.add_argument("--socket", required=True, help="Unix socket path to listen on")
    p.add_argument("--preload", default="torch", help="comma-separated modules to import before forking")
    p.add_argument("--exit-on-stdin-eof", action="store_true", help="exit when stdin closes (the frontend's lifeline)")
    args = p.parse_args(argv)
    modules = [m.strip() for m in args.preload.split(",") if m.strip()]
    modules += [*WORKER_MODULES, *(TORCH_WORKER_MODULES if "torch" in modules else ())]
    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass
    # Listen first: workers launched while torch is still importing wait in the backlog for it,
    # instead of starting cold and importing it once more each.
    zygote = Zygote(args.socket, args.exit_on_stdin_eof)
    failed = preload(modules)
    if failed:
        print(f"zygote: could not preload {'; '.join(failed)}", flush=True)
    print(f"zygote ready: pid {os.getpid()}, preloaded "
          f"{', '.join(m for m in modules if m in sys.modules and not m.startswith('ts.'))}",
          flush=True)
    try:
        zygote.serve()
    except KeyboardInterrupt:
        pass
    if args.exit_on_stdin_eof:  # the frontend that would have removed them is gone
        os.unlink(args.socket)
        os.rmdir(os.path.dirname(os.path.abspath(args.socket)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
