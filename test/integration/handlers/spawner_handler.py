"""Test handler: starts child processes that ignore SIGTERM, and answers their pids.

One child inherits the worker's environment; the other starts with an empty environment, so only
the worker's process group ties it to the worker. Both must end when the worker ends.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from ts.context import Context

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
children: list[subprocess.Popen] = []


def handle(data: list[dict[str, Any]] | None, context: Context) -> list[Any]:
    if data is None:
        return []
    if not children:
        children.append(subprocess.Popen([sys.executable, "-c", STUBBORN]))
        children.append(subprocess.Popen([sys.executable, "-c", STUBBORN], env={}))
    return [{"children": [c.pid for c in children]} for _ in data]
