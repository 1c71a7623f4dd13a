"""The workflow's function nodes (the .war's --handler): ``pre`` cleans the request's text,
``post`` combines what the two models answered. Each is ``fn(data, context)`` and returns one
output per request of the batch, as a handler does; it is also called once with ``None`` when
its worker loads."""

from __future__ import annotations

import json
from typing import Any


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def pre(data, context):
    if data is None:
        return None
    # a start node gets the request's own inputs ("body", or "data", or form fields)
    return [" ".join(_text(row.get("data", row.get("body"))).split()) for row in data]


def post(data, context):
    if data is None:
        return None
    # two parents: one input per parent, named after it, holding its output (bytes)
    return [{"upper": json.loads(row["upper"])["upper"], "words": json.loads(row["count"])["words"],
             "inputs": sorted(row)} for row in data]
