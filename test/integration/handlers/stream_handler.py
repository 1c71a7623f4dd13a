"""Test handler: streams ``n`` pieces (the request body is n) as separate chunks, then a last one."""

from __future__ import annotations

from typing import Any

from ts.context import Context
from ts.handler_utils.utils import send_intermediate_predict_response


def handle(data: list[dict[str, Any]] | None, context: Context) -> list[Any]:
    if data is None:
        return []
    raw = data[0].get("data") or data[0].get("body") or b"3"
    n = int(raw.decode() if isinstance(raw, (bytes, bytearray)) else raw)
    for i in range(n):
        send_intermediate_predict_response([f"piece-{i};"], context.request_ids, "", 200, context)
    return ["done"]
