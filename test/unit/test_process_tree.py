"""ts.utils.process_tree.stop_process_tree: what `torchserve --stop` reports is what happened."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ts.utils.process_tree import descendants, process_alive, stop_process_tree

# A parent that starts a child ignoring SIGTERM, then exits on SIGTERM (or ignores it too).
PARENT = textwrap.dedent("""
    import signal, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE)
    child.stdout.readline()
    if sys.argv[1] == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    time.sleep(60)
""")


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(mode: str) -> subprocess.Popen[str]:
        script = tmp_path / "parent.py"
        script.write_text(PARENT)
        proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_server_that_stops_in_time_but_leaves_a_child_is_not_reported_as_killed(tree: Callable[[str], subprocess.Popen[str]]) -> None:
    parent = tree("exit")
    child = descendants(parent.pid)[0]
    begin = time.monotonic()
    outcome = stop_process_tree(parent.pid, 30.0)
    parent.wait()
    assert outcome.exited_in_time and outcome.waited_s < 30
    assert outcome.killed == (child,)
    deadline = time.monotonic() + 10  # SIGKILL is delivered asynchronously: poll for the child's end
    while process_alive(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not process_alive(child)
    message = outcome.describe("TorchServe")
    assert "did not stop within" not in message, message
    assert message.startswith("TorchServe stopped in ") and f"(pid {child})" in message, message
    assert time.monotonic() - begin < 30


def test_a_server_that_ignores_sigterm_is_reported_killed_after_the_timeout(tree: Callable[[str], subprocess.Popen[str]]) -> None:
    parent = tree("ignore")
    outcome = stop_process_tree(parent.pid, 0.5)
    parent.wait()
    assert not outcome.exited_in_time
    assert outcome.describe("TorchServe") == "TorchServe did not stop within 0.5 s and was killed."


def test_a_clean_stop_says_so() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        outcome = stop_process_tree(proc.pid, 30.0)
        proc.wait()
    finally:
        proc.kill()
    assert outcome.graceful and outcome.describe("TorchServe") == "TorchServe has stopped."
