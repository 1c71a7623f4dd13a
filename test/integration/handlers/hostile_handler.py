"""Test handler that misbehaves on request, for the hardening tests (docs/reliability.md).

Each request's input is a command: ``flood:<MB>`` writes that many MB to stdout without a line
break (then one), ``header-crlf`` / ``reason-crlf`` / ``header-name`` answer with a header value,
reason phrase or header name the HTTP encoder must refuse, ``sleep:<s>`` answers after that many
seconds, ``raise:<text>`` raises RuntimeError(text). Anything else is echoed.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ts.context import Context


def handle(data: list[dict[str, Any]] | None, context: Context) -> list[Any]:
    if data is None:
        return []
    out: list[Any] = []
    for idx, row in enumerate(data):
        value = row.get("data") if row.get("data") is not None else row.get("body")
        text = value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
        if text.startswith("flood:"):
            chunk = "x" * (1 << 20)
            for _ in range(int(text.split(":", 1)[1])):
                sys.stdout.write(chunk)
            sys.stdout.write("\nflood done\n")
            sys.stdout.flush()
        elif text.startswith("sleep:"):
            time.sleep(float(text.split(":", 1)[1]))
        elif text.startswith("raise:"):
            raise RuntimeError(text.split(":", 1)[1])
        elif text == "header-crlf":
            context.set_response_header(idx, "x-bad", "a\r\nInjected-Header: 1")
        elif text == "reason-crlf":
            context.set_response_status(200, "OK\r\nInjected-Reason: 1", idx)
        elif text == "header-name":
            context.set_response_header(idx, "bad name:", "v")
        out.append(text)
    return out
