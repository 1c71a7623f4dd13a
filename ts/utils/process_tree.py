"""Processes below a process, from /proc: the launcher's ``--stop`` (ts/model_server.py) and
the tests' and benchmarks' checks that nothing a server started is left running."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (workers, torchrun agents and their ranks), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def process_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


LEFTOVER_GRACE_S = 1.0


@dataclass(frozen=True)
class StopOutcome:
    """What ``stop_process_tree`` did: whether ``pid`` exited on SIGTERM within the timeout (and after
    how long), and which processes were still alive after it and had to be SIGKILLed."""

    exited_in_time: bool
    waited_s: float
    timeout_s: float
    killed: tuple[int, ...]

    @property
    def graceful(self) -> bool:
        return self.exited_in_time and not self.killed

    def describe(self, name: str) -> str:
        """One true sentence for the user: which of the two things that can go wrong happened."""
        if self.graceful:
            return f"{name} has stopped."
        if not self.exited_in_time:
            return f"{name} did not stop within {self.timeout_s:g} s and was killed."
        pids = ", ".join(str(p) for p in self.killed)
        return (f"{name} stopped in {self.waited_s:.1f} s, but {len(self.killed)} process(es) it had started "
                f"were still running and were killed (pid {pids}).")


def stop_process_tree(pid: int, timeout: float) -> StopOutcome:
    """SIGTERM ``pid`` (a frontend stops its own workers), then after ``timeout`` SIGKILL it and
    whatever is left below it (also when it exited in time but left processes behind)."""
    tree = descendants(pid)
    started = time.monotonic()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return StopOutcome(True, 0.0, timeout, ())
    deadline = started + timeout
    while time.monotonic() < deadline and process_alive(pid):
        time.sleep(0.1)
    exited = not process_alive(pid)
    waited = time.monotonic() - started
    below = [*tree, *descendants(pid)]
    # processes the frontend told to stop may still be exiting when it is gone: a moment to finish
    settle = min(deadline, time.monotonic() + LEFTOVER_GRACE_S)
    while exited and time.monotonic() < settle and any(process_alive(p) for p in below):
        time.sleep(0.05)
    leftovers = [p for p in [pid, *below] if process_alive(p)]
    for p in leftovers:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return StopOutcome(exited, waited, timeout, tuple(p for p in leftovers if p != pid))
