"""A module handler with the optional ``end_sequence`` hook: answers the sequence ids it was told
ended (SEQUENCE_END); the id ``boom`` makes the hook raise after recording it."""

from __future__ import annotations

import json

ENDED: list[str] = []


def end_sequence(sequence_id: str) -> None:
    ENDED.append(sequence_id)
    if sequence_id == "boom":
        raise RuntimeError("the hook failed on purpose")


def handle(data, context):
    return [json.dumps(ENDED) for _ in data or []]
