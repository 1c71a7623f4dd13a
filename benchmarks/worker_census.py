"""Which worker processes of a server no model describes (issue 43's register/scale/unregister storm).

A worker is one of these processes below the server's root process (from /proc,
benchmarks/procstat.py):

- a cold worker, ``python -m ts.model_service_worker``, started by the frontend;
- a warm start's launcher, ``ts/warmstart/launch.py``, started by the frontend, and the process
  the zygote forked for it (a child of ``ts.warmstart.zygote``), which holds the launcher's
  stdout: the pair is one worker, described by either pid (the describe API names the launcher
  until the worker's LOADED names the fork);
- a torchrun agent, ``ts.utils.die_with_parent``, started by the frontend.

A worker's own children (a handler's subprocesses, torchrun's ranks) belong to it and are not
counted. ``undescribed`` returns every worker whose pid, and whose partner's pid, is in no
model's describe answer: after every model is unregistered and the stopping workers have ended,
that list must be empty.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from benchmarks import procstat
from benchmarks.servers import ServerError, http_request

ZYGOTE = "ts.warmstart.zygote"
LAUNCHED_WORKERS = ("ts.model_service_worker", "ts/warmstart/launch.py", "ts.utils.die_with_parent")


@dataclass(frozen=True)
class Worker:
    """One worker: its processes (a warm start's launcher and fork, or one process) and a command line."""

    pids: tuple[int, ...]
    cmdline: str


def stdout_of(pid: int) -> str | None:
    """What the process's stdout is (``pipe:[inode]``), None when it is gone or unreadable."""
    try:
        return os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        return None


def workers(tree: list[procstat.ProcInfo], stdout: Callable[[int], str | None] = stdout_of) -> list[Worker]:
    """The workers among a server's processes (``tree``: its root and every descendant)."""
    by_pid = {p.pid: p for p in tree}
    # the zygote's forks keep its command line: the zygote is the one whose parent is no zygote
    zygotes = {p.pid for p in tree if ZYGOTE in p.cmdline and ZYGOTE not in getattr(by_pid.get(p.ppid), "cmdline", "")}
    launched = [p for p in tree if ZYGOTE not in p.cmdline and any(w in p.cmdline for w in LAUNCHED_WORKERS)]
    launched_pids = {p.pid for p in launched}
    # the outermost worker process only: a worker's children (ranks of a torchrun agent) are its own
    launched = [p for p in launched if p.ppid not in launched_pids]
    forks = [p for p in tree if p.ppid in zygotes]
    fork_by_stdout = {out: p.pid for p in forks if (out := stdout(p.pid)) is not None and out.startswith("pipe:")}
    found, paired = [], set()
    for p in launched:
        partner = fork_by_stdout.get(stdout(p.pid) or "")
        if partner is not None:
            paired.add(partner)
        found.append(Worker((p.pid,) if partner is None else (p.pid, partner), p.cmdline))
    # a fork whose launcher is gone (its lifeline should have ended it) is a worker of its own
    found += [Worker((p.pid,), p.cmdline) for p in forks if p.pid not in paired]
    return found


def undescribed(found: Iterable[Worker], described: set[int]) -> list[Worker]:
    """The workers none of whose pids a describe answer names."""
    return [w for w in found if not described.intersection(w.pids)]


def described_pids(management_port: int) -> set[int]:
    """Every worker pid the describe API names, over every version of every registered model."""
    described: set[int] = set()
    for name in model_names(management_port):
        status, data = http_request(management_port, "GET", f"/models/{name}/all", timeout=30)
        if status == 404:
            continue  # unregistered between the list and the describe
        if status != 200:
            raise ServerError(f"describe {name}: HTTP {status} {data[:200]!r}")
        for version in json.loads(data):
            described.update(int(w["pid"]) for w in version.get("workers", []) if int(w.get("pid", -1)) > 0)
    return described


def model_names(management_port: int) -> list[str]:
    """Every registered model's name (following the list API's pages)."""
    names: list[str] = []
    token = ""
    while True:
        status, data = http_request(management_port, "GET", f"/models?limit=100{token}", timeout=30)
        if status != 200:
            raise ServerError(f"list models: HTTP {status} {data[:200]!r}")
        page = json.loads(data)
        names += [m["modelName"] for m in page.get("models", [])]
        if not page.get("nextPageToken"):
            return names
        token = f"&next_page_token={page['nextPageToken']}"


def census(root: int, management_port: int) -> list[Worker]:
    """The server's undescribed workers now. The processes are read before and after the describe
    answers: a worker counts only when it was there both times (one that a scale started or a stop
    ended meanwhile is no leak), and with its pids as the second read saw them."""
    before = {pid for w in workers(procstat.process_tree(root)) for pid in w.pids}
    described = described_pids(management_port)
    after = workers(procstat.process_tree(root))
    return [w for w in undescribed(after, described) if before.intersection(w.pids)]
