"""The workflow handler of the workflow tests: its function nodes (TorchServe's signature)."""

from __future__ import annotations

import json
from typing import Any


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def pre(data, context):
    # called once with None when the node's worker loads
    if data is None:
        return None
    return [_text(row.get("data", row.get("body"))).strip() for row in data]


def post(data, context):
    # two parents: one input per parent, named after it
    if data is None:
        return None
    return [{"upper": json.loads(row["upper"])["upper"], "words": json.loads(row["count"])["words"],
             "inputs": sorted(row)} for row in data]


def boom(data, context):
    if data is None:
        return None
    raise ValueError("boom cannot take " + _text(data[0]["body"]))
