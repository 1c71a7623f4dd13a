"""Runs a command that is SIGKILLed when the process that started it dies (Linux).

``python -m ts.utils.die_with_parent PARENT_PID -- COMMAND...`` sets PR_SET_PDEATHSIG to SIGKILL
and replaces itself with COMMAND (the setting survives exec), so the frontend's torchrun agent
cannot outlive the frontend, even a SIGKILLed one (docs/distributed.md, "Faults"). PARENT_PID is
the frontend's pid: when it is already gone before the setting took effect, nothing is started.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Asks the kernel to send ``sig`` when the parent dies; False where prctl is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        sys.stderr.write("usage: python -m ts.utils.die_with_parent PARENT_PID -- COMMAND [ARG...]\n")
        return 2
    parent, command = int(argv[0]), argv[2:]
    if not set_parent_death_signal():
        sys.stderr.write("die_with_parent: prctl(PR_SET_PDEATHSIG) is unavailable; "
                         f"{command[0]} may outlive its parent\n")
    if os.getppid() != parent:   # the parent died before the signal was armed
        sys.stderr.write(f"die_with_parent: parent {parent} is gone; not starting {command[0]}\n")
        return 1
    os.execvp(command[0], command)
    return 1   # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
