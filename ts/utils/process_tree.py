"""Processes below a process, from /proc: the launcher's ``--stop`` (ts/model_server.py) and
the tests' and benchmarks' checks that nothing a server started is left running."""

from __future__ import annotations

import os
import signal
import time
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


def stop_process_tree(pid: int, timeout: float) -> bool:
    """SIGTERM ``pid`` (a frontend stops its own workers), then after ``timeout`` SIGKILL it and
    whatever is left below it. True if it ended in time and left nothing behind."""
    tree = descendants(pid)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process_alive(pid):
        time.sleep(0.1)
    graceful = not process_alive(pid)
    leftovers = [p for p in [pid, *tree, *descendants(pid)] if process_alive(p)]
    for p in leftovers:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return graceful and not leftovers
