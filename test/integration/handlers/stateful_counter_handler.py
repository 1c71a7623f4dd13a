"""Test handler for stateful sequences: each sequence keeps a running total of the numbers it was
sent. ``ts_request_sequence_start`` resets it, ``ts_request_sequence_end`` forgets it, and so does
the frontend's SEQUENCE_END (``end_sequence``). Answers the total, the sequence id, the worker pid,
how many sequences this worker holds and the ids it was told ended."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ts.context import Context

TOTALS: dict[str, int] = {}
ENDED: set[str] = set()


def end_sequence(sequence_id: str) -> None:
    """The frontend closed the sequence (end header, idle expiry): its total is dropped."""
    ENDED.add(sequence_id)
    TOTALS.pop(sequence_id, None)


def handle(data: list[dict[str, Any]] | None, context: Context) -> list[Any]:
    if data is None:
        return []
    out = []
    for idx, row in enumerate(data):
        seq = context.get_sequence_id(idx)
        if context.get_request_header(idx, "ts_request_sequence_start") == "true":
            TOTALS[seq] = 0
        raw = row.get("data") or row.get("body") or b"0"
        value = int(raw.decode() if isinstance(raw, (bytes, bytearray)) else raw)
        time.sleep(0.05)  # a read-modify-write that concurrent requests of one sequence would break
        TOTALS[seq] = TOTALS.get(seq, 0) + value
        out.append(json.dumps({"sequence": seq, "total": TOTALS[seq], "pid": os.getpid(),
                               "held": len(TOTALS), "ended": sorted(ENDED)}))
        if context.get_request_header(idx, "ts_request_sequence_end") == "true":
            TOTALS.pop(seq, None)
    return out
