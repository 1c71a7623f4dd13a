"""Two tiny text "models" for the workflow example, one handler file archived twice.

The archive's model name picks the behaviour: ``upper`` answers ``{"upper": TEXT}``, ``count``
answers ``{"words": N}``. Inputs come as ``body`` (or ``data``), bytes or text.
"""

from __future__ import annotations

from typing import Any

from ts.context import Context


def _text(row: dict[str, Any]) -> str:
    value = row.get("data", row.get("body"))
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def handle(data: list[dict[str, Any]] | None, context: Context) -> list[Any] | None:
    if data is None:  # called once with None when the worker loads
        return None
    if context.manifest["model"]["modelName"] == "upper":
        return [{"upper": _text(row).upper()} for row in data]
    return [{"words": len(_text(row).split())} for row in data]
