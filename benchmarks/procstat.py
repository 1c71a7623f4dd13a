"""CPU time and resident memory of a process tree, read from /proc (Linux only)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class ProcInfo:
    pid: int
    ppid: int
    cmdline: str
    cpu_s: float  # utime + stime of this process (its own threads only)
    rss_mb: float


def _read_stat(pid: int) -> tuple[int, float, float] | None:
    """(ppid, cpu seconds, rss MB) of a live pid, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("latin-1")
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime = int(fields[11]), int(fields[12])
    rss_pages = int(fields[21])
    return ppid, (utime + stime) / _TICK, rss_pages * _PAGE / (1024 * 1024)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def process_tree(root: int) -> list[ProcInfo]:
    """The root process and every live descendant."""
    parents: dict[int, int] = {}
    stats: dict[int, tuple[int, float, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _read_stat(int(name))
            if st is not None:
                stats[int(name)] = st
                parents[int(name)] = st[0]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out: list[ProcInfo] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid not in stats:
            continue
        ppid, cpu, rss = stats[pid]
        out.append(ProcInfo(pid, ppid, cmdline(pid), cpu, rss))
        todo.extend(children.get(pid, []))
    return out


def tree_cpu_s(root: int) -> float:
    return sum(p.cpu_s for p in process_tree(root))


def is_frontend(info: ProcInfo) -> bool:
    """The JVM of either server (tserve or TorchServe)."""
    exe = info.cmdline.split(" ", 1)[0]
    return os.path.basename(exe) == "java"


def split_rss(root: int) -> dict[str, float]:
    """RSS (MB) of the frontend JVM and of the sum of worker processes under ``root``.

    The launcher (``torchserve --foreground``'s Python process) is counted in neither: it is
    the same thin wrapper for both servers and does no serving work.
    """
    tree = process_tree(root)
    java = [p for p in tree if is_frontend(p)]
    java_pids = {p.pid for p in java}
    workers = [p for p in tree if p.pid != root and p.pid not in java_pids]
    return {
        "frontend_mb": round(sum(p.rss_mb for p in java), 1),
        "workers_mb": round(sum(p.rss_mb for p in workers), 1),
        "workers": len(workers),
    }


def jit_cpu_s(pid: int) -> float:
    """CPU seconds of a JVM's JIT compiler threads ("C1/C2 CompilerThread")."""
    total = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                raw = fh.read().decode("latin-1")
        except OSError:
            continue
        if "CompilerThre" in raw[raw.index("(") : raw.rindex(")")]:
            fields = raw[raw.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def split_cpu(root: int) -> dict[str, float]:
    """CPU seconds of the frontend JVM (and of its JIT threads alone) and of everything else."""
    tree = process_tree(root)
    java = [p for p in tree if is_frontend(p)]
    fe = sum(p.cpu_s for p in java)
    return {"frontend_s": fe, "jit_s": sum(jit_cpu_s(p.pid) for p in java),
            "other_s": sum(p.cpu_s for p in tree) - fe}


def median_thread_cpu_ms(fn: Callable[[], object], repeats: int) -> float:
    """The median CPU time of ``fn`` on this thread, in ms, after one warm-up call: on a shared
    machine wall-clock times swing with the other work, the thread's own CPU time much less."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.thread_time()
        fn()
        times.append(time.thread_time() - started)
    return statistics.median(times) * 1000
