"""The hostile soak's model (benchmarks/hostile_soak.py): echoes each body's bytes; ``sleep:<s>``
sleeps first (a slow request, for pipelining order); ``spawn`` starts, once per worker, a child
that ignores SIGTERM and answers its pid (it must not outlive ``torchserve --stop``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
_children: list[subprocess.Popen] = []


def _answer(body: bytes) -> bytes:
    if body.startswith(b"sleep:"):
        time.sleep(float(body[6:].split(b";")[0]))
    elif body == b"spawn":
        if not _children:
            _children.append(subprocess.Popen([sys.executable, "-c", STUBBORN], env={}))
        return json.dumps({"pid": _children[0].pid}).encode()
    return body


def handle(data: list[dict[str, Any]] | None, context: Any) -> list[bytes] | None:
    if data is None:
        return None
    out = []
    for row in data:
        value = row.get("body") if row.get("body") is not None else row.get("data")
        if isinstance(value, str):
            value = value.encode()
        out.append(_answer(value if isinstance(value, (bytes, bytearray)) else json.dumps(value).encode()))
    return out
