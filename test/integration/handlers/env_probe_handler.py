"""Test handler: answers what a worker sees of its process — pid, parent, cwd, sys.path, a
variable of its environment, a random number, whether torch is imported — so tests can compare
warm (forked) and cold starts."""

from __future__ import annotations

import os
import random
import sys
from typing import Any

from ts.context import Context


def handle(data: list[dict[str, Any]] | None, context: Context) -> list[Any]:
    if data is None:
        return []
    return [{
        "pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "sysPath": sys.path[:3],
        "warm": os.environ.get("TS_WARM_START", ""), "probe": os.environ.get("PROBE_VAR", ""),
        "random": random.random(), "torchImported": "torch" in sys.modules,
        "modelDir": context.system_properties.get("model_dir"),
    } for _ in data]
