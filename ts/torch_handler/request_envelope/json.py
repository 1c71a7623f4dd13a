"""json envelope: {"instances": [...]} in ({"b64": ...} decoded), {"predictions": [...]} out."""

from __future__ import annotations

import base64
import json
from typing import Any

from ts.torch_handler.request_envelope.base import BaseEnvelope, bad_request, request_body, split_by_lengths


class JSONEnvelope(BaseEnvelope):
    def __init__(self, handle_fn: Any) -> None:
        super().__init__(handle_fn)
        self._lengths: list[int] = []

    def parse_input(self, data: list[Any]) -> list[Any]:
        batches = [self._from_json(row) for row in data]
        self._lengths = [len(b) for b in batches]
        return [item for b in batches for item in b]

    def format_output(self, data: list[Any]) -> list[str]:
        if len(data) != sum(self._lengths):
            raise ValueError(f"handler returned {len(data)} predictions for {sum(self._lengths)} instances")
        return [json.dumps({"predictions": chunk}) for chunk in split_by_lengths(list(data), self._lengths)]

    def _from_json(self, row: Any) -> list[Any]:
        body = request_body(row, "json")
        if "instances" not in body or not isinstance(body["instances"], list):
            raise bad_request('the json envelope needs the key "instances" (a list) in the request body: '
                              '{"instances": [...]}')
        rows = list(body["instances"])
        for i, inst in enumerate(rows):
            if isinstance(inst, dict) and list(inst) == ["b64"]:
                rows[i] = base64.b64decode(inst["b64"])
        return rows
