"""Test handler for the workflow tests: one file, two tiny "models" chosen by the archive's name.

``upper`` answers ``{"upper": TEXT}``, ``count`` answers ``{"words": N, "batch": size of the batch}``.
"""

from __future__ import annotations

from typing import Any

from ts.context import Context


def _text(row: dict[str, Any]) -> str:
    value = row.get("data", row.get("body"))
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def handle(data: list[dict[str, Any]] | None, context: Context) -> list[Any] | None:
    if data is None:
        return None
    kind = context.manifest["model"]["modelName"]
    if kind == "upper":
        return [{"upper": _text(row).upper()} for row in data]
    return [{"words": len(_text(row).split()), "batch": len(data)} for row in data]
