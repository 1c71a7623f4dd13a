"""Test handler: echoes what it received, plus controls for failures, delays and status codes.

Each request's input (``data`` or ``body``) may be a command:
``fail`` raises (batch-level 500), ``sleep:<s>`` sleeps, ``status:<code>`` sets that status,
``pid`` answers the worker pid. Anything else is echoed.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ts.context import Context


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return value
    return json.dumps(value)


def handle(data: list[dict[str, Any]] | None, context: Context) -> list[Any]:
    if data is None:  # TorchServe calls a function handler once with None to initialize it
        return []
    if context.get_request_header(0, "describe") == "True":
        return [{"handler": "echo", "pid": os.getpid(), "model": context.model_name}]
    out: list[Any] = []
    for idx, row in enumerate(data):
        value = row.get("data") if row.get("data") is not None else row.get("body")
        text = _text(value) if value is not None else ""
        print(f"echo handling {text}", flush=True)  # tests wait for this line in the model log
        if text == "fail":
            raise RuntimeError("echo handler was asked to fail")
        if text.startswith("sleep:"):
            time.sleep(float(text.split(":", 1)[1]))
        if text.startswith("status:"):
            context.set_response_status(int(text.split(":", 1)[1]), "custom status", idx)
        if text == "pid":
            out.append({"pid": os.getpid()})
            continue
        context.set_response_header(idx, "x-echo-batch", str(len(data)))
        out.append({
            "text": text,
            "keys": sorted(row.keys()),
            "types": {k: type(v).__name__ for k, v in row.items()},
            "batch": len(data),
            "pid": os.getpid(),
            "request_id": context.get_request_id(idx),
            "version": ((context.manifest or {}).get("model") or {}).get("modelVersion"),
            "url_path": context.get_request_header(idx, "url_path"),
            "explain": context.get_request_header(idx, "explain"),
            "x_custom": context.get_request_header(idx, "x-custom"),
        })
    return out
