"""ts.utils.die_with_parent: the command it runs is SIGKILLed when its parent dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ts.utils import die_with_parent

PYTHON = sys.executable


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_the_command_dies_when_its_parent_is_sigkilled(tmp_path) -> None:
    # parent: a python that starts the guarded sleeper, prints its pid, then waits to be killed
    pidfile = tmp_path / "child.pid"
    parent_code = (
        "import os, subprocess, sys, time\n"
        f"p = subprocess.Popen([{PYTHON!r}, '-m', 'ts.utils.die_with_parent', str(os.getpid()), '--',"
        f" {PYTHON!r}, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([PYTHON, "-c", parent_code], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + 20
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the parent never started the child"
            time.sleep(0.05)
        child = int(pidfile.read_text())
        # the guard replaced itself with the command (same pid): wait until exec happened
        while "time.sleep(60)" not in open(f"/proc/{child}/cmdline").read().replace("\0", " "):
            assert time.monotonic() < deadline, "the guard never ran the command"
            time.sleep(0.05)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        while alive(child):
            assert time.monotonic() < deadline, f"pid {child} outlived its SIGKILLed parent"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_a_parent_already_gone_starts_nothing(capsys) -> None:
    assert die_with_parent.main([str(os.getppid() + 1 if os.getppid() != 1 else 2), "--", "true"]) == 1
    assert "is gone; not starting true" in capsys.readouterr().err


def test_bad_usage_is_explained(capsys) -> None:
    assert die_with_parent.main(["x", "true"]) == 2
    assert "usage:" in capsys.readouterr().err
