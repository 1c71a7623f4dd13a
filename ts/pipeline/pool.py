"""The preprocess pool: N spawned processes that run a handler's preprocess/postprocess.

Each process imports the handler, calls its optional ``initialize_preprocess(context)`` (never
``initialize``), and then runs whole batches. A manager thread in the worker assigns tasks to
idle processes, collects results, and replaces a process that dies (failing only its batch).
Tensors cross the process boundary through ``torch.multiprocessing``'s shared-memory
reductions (the storage is moved to shared memory and its file descriptor passed), not as
pickled copies of the data.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

import torch.multiprocessing as tmp

from ts.service import BatchError

logger = logging.getLogger("ts.pool")

READY_TIMEOUT_S = float(os.environ.get("TS_POOL_READY_TIMEOUT_S", "300"))
# Tasks a process may hold: the one it runs plus one waiting in its pipe, so that it starts the
# next batch at once instead of idling while its result travels back and the next task comes.
PREFETCH = 2


@dataclass
class ChildConfig:
    """What a pool process needs to rebuild the handler and its context."""

    load: dict[str, Any]
    metrics_config: str | None
    rank: int
    local_rank: int
    world_size: int
    threads: int = 1


@dataclass
class Task:
    kind: str  # "pre" | "post"
    batch_id: int
    payload: dict[str, Any]
    future: Future[dict[str, Any]] = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)
    started: float = 0.0


@dataclass
class Slot:
    index: int
    process: Any = None
    conn: Connection | None = None
    ready: bool = False
    tasks: deque[Task] = field(default_factory=deque)  # sent, unanswered; the first one is running
    restarts: int = 0
    broken: str = ""
    tmpdir: str = ""  # the process's multiprocessing folder (pymp-*), removed here once it is gone


class PoolStartError(Exception):
    """The pool could not start; ``status`` 400 when the handler does not fit the pool, else 500."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


class PreprocessPool:
    def __init__(self, size: int, config: ChildConfig, chunk_callback: Any = None) -> None:
        self.size = size
        self.config = config
        self.chunk_callback = chunk_callback
        self._mp = tmp.get_context("spawn")
        self._slots = [Slot(i) for i in range(size)]
        self._pending: deque[Task] = deque()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = self._mp.Pipe(duplex=False)
        self._closed = False
        self._manager: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Spawn every process (returns at once; wait_ready() blocks until they initialised)."""
        for slot in self._slots:
            self._spawn(slot)

    def _spawn(self, slot: Slot) -> None:
        parent, child = self._mp.Pipe(duplex=True)
        from ts.pipeline.child import child_main

        proc = self._mp.Process(target=child_main, args=(child, self.config, slot.index),
                                name=f"preprocess-{slot.index}", daemon=True)
        proc.start()
        child.close()
        slot.process, slot.conn, slot.ready, slot.tasks = proc, parent, False, deque()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until every process answered; PoolStartError with the handler's message if not."""
        deadline = time.monotonic() + timeout
        for slot in self._slots:
            assert slot.conn is not None
            while not slot.conn.poll(0.1):
                if not slot.process.is_alive():
                    raise PoolStartError(f"preprocess process {slot.index} exited with code "
                                         f"{slot.process.exitcode} during initialize_preprocess")
                if time.monotonic() > deadline:
                    raise PoolStartError(f"preprocess process {slot.index} did not finish "
                                         f"initialize_preprocess within {timeout:.0f} s")
            msg = slot.conn.recv()
            if msg[0] != "ready":
                raise PoolStartError(msg[1], msg[2] if len(msg) > 2 else 500)
            slot.ready, slot.tmpdir = True, msg[1]
        self._manager = threading.Thread(target=self._run, name="preprocess-pool", daemon=True)
        self._manager.start()
        logger.info("preprocess pool ready: %d processes (pids %s)", self.size,
                    ",".join(str(s.process.pid) for s in self._slots))

    def pids(self) -> list[int]:
        return [s.process.pid for s in self._slots if s.process is not None]

    def close(self, timeout: float = 5.0) -> None:
        self._closed = True
        self._wake()
        if self._manager is not None:
            self._manager.join(timeout)
        for slot in self._slots:
            try:
                if slot.conn is not None:
                    slot.conn.send(("stop",))
            except (OSError, ValueError):
                pass
        for slot in self._slots:
            if slot.process is not None:
                slot.process.join(timeout)
                if slot.process.is_alive():
                    slot.process.kill()
                    slot.process.join(timeout)
            _remove_tmpdir(slot)
        with self._lock:
            for task in self._pending:
                task.future.set_exception(BatchError(503, "the worker is shutting down"))
            self._pending.clear()

    # ------------------------------------------------------------------ tasks
    def submit(self, kind: str, batch_id: int, payload: dict[str, Any]) -> Task:
        task = Task(kind, batch_id, payload)
        with self._lock:
            if kind == "post":
                self._pending.appendleft(task)  # finishing a batch beats starting one
            else:
                self._pending.append(task)
        self._wake()
        return task

    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b"x")
        except (OSError, ValueError):
            pass

    # ------------------------------------------------------------------ manager
    def _assign(self) -> None:
        with self._lock:
            # idle processes first, then one task ahead for each busy one
            for depth in range(PREFETCH):
                for slot in self._slots:
                    if not self._pending:
                        return
                    if slot.ready and len(slot.tasks) == depth and not slot.broken:
                        task = self._pending.popleft()
                        if depth == 0:
                            task.started = time.monotonic()
                        slot.tasks.append(task)
                        try:
                            slot.conn.send((task.kind, task.batch_id, task.payload))  # type: ignore[union-attr]
                        except (OSError, ValueError) as exc:
                            # The process died under us; its sentinel fires next and retries the slot.
                            logger.warning("preprocess process %d: send failed (%s)", slot.index, exc)
            if self._pending and all(s.broken for s in self._slots):
                while self._pending:
                    self._pending.popleft().future.set_exception(BatchError(
                        503, "every preprocess process failed to restart; see the worker log"))

    def _run(self) -> None:
        while not self._closed:
            self._assign()
            waitables: list[Any] = [self._wake_r]
            by_obj: dict[Any, tuple[str, Slot]] = {}
            for slot in self._slots:
                if slot.broken or slot.process is None:
                    continue
                waitables += [slot.conn, slot.process.sentinel]
                by_obj[slot.conn] = ("conn", slot)
                by_obj[slot.process.sentinel] = ("dead", slot)
            for obj in wait(waitables):
                if obj is self._wake_r:
                    while self._wake_r.poll():
                        self._wake_r.recv_bytes()
                    continue
                what, slot = by_obj[obj]
                if what == "conn":
                    self._on_message(slot)
            # Deaths are handled after messages so that a result sent just before dying counts.
            for slot in self._slots:
                if slot.process is not None and not slot.broken and not slot.process.is_alive():
                    self._on_death(slot)

    def _on_message(self, slot: Slot) -> None:
        try:
            msg = slot.conn.recv()  # type: ignore[union-attr]
        except (EOFError, OSError):
            return  # the sentinel reports the death
        kind = msg[0]
        if kind == "ready":
            slot.ready, slot.tmpdir = True, msg[1]
            logger.info("preprocess process %d (pid %d) restarted and ready", slot.index, slot.process.pid)
            return
        if kind == "init-error":
            slot.broken = msg[1]
            logger.error("preprocess process %d cannot restart: %s", slot.index, msg[1])
            return
        if kind == "chunk":
            if self.chunk_callback is not None:
                self.chunk_callback(msg[1], msg[2])
            return
        if not slot.tasks:
            return
        task = slot.tasks.popleft()
        if slot.tasks:
            slot.tasks[0].started = time.monotonic()  # the process goes straight on to the next one
        if kind == "ok":
            reply = msg[2]
            reply["wait"] = task.started - task.enqueued  # queue wait before a process took it
            task.future.set_result(reply)
        else:  # ("err", batch_id, status, message)
            task.future.set_exception(BatchError(msg[2], msg[3]))

    def _on_death(self, slot: Slot) -> None:
        proc = slot.process
        proc.join(1)
        _remove_tmpdir(slot)
        code = proc.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        task = slot.tasks.popleft() if slot.tasks else None
        with self._lock:  # tasks it had not started yet go back to the front of the queue
            self._pending.extendleft(reversed(slot.tasks))
        slot.tasks = deque()
        logger.error("preprocess process %d (pid %d) died (%s)%s; starting a replacement", slot.index, proc.pid,
                     how, f" while running batch {task.batch_id}" if task else "")
        if task is not None:
            task.future.set_exception(BatchError(500, f"preprocess process {proc.pid} died ({how}) while running "
                                                      f"{'preprocess' if task.kind == 'pre' else 'postprocess'} "
                                                      "for this batch; it has been replaced"))
        try:
            slot.conn.close()  # type: ignore[union-attr]
        except OSError:
            pass
        slot.restarts += 1
        self._spawn(slot)


def _remove_tmpdir(slot: Slot) -> None:
    """A process that exits normally removes its pymp-* folder itself; a killed one cannot."""
    if slot.tmpdir:
        shutil.rmtree(slot.tmpdir, ignore_errors=True)
        slot.tmpdir = ""
