"""BaseEnvelope: wraps a handler entry point (TorchServe's interface)."""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from ts.context import Context
from ts.utils.util import PredictionException


def bad_request(message: str) -> PredictionException:
    """A malformed request body: the client's mistake, so 400 rather than a handler failure."""
    return PredictionException(message, 400)


class BaseEnvelope(ABC):
    def __init__(self, handle_fn: Callable[[Any, Context], Any]) -> None:
        self._handle_fn = handle_fn
        self.context: Context | None = None

    def handle(self, data: Any, context: Context) -> Any:
        if data:
            self.context = context
            data = self.parse_input(data)
        results = self._handle_fn(data, context)
        if results:
            results = self.format_output(results)
        return results

    @abstractmethod
    def parse_input(self, data: Any) -> Any: ...

    @abstractmethod
    def format_output(self, data: Any) -> Any: ...


def request_body(row: Any, envelope: str) -> Any:
    """The request's JSON document (``data`` or ``body``), decoded if it is still bytes/str."""
    body = row.get("data") or row.get("body") if isinstance(row, dict) else row
    if isinstance(body, (bytes, bytearray)):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError as exc:  # found by test/fuzz/fuzz_nesting.py: was a 500 for the batch
            raise bad_request(f"the {envelope} envelope needs a UTF-8 JSON request body: {exc}") from None
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError as exc:
            raise bad_request(f"the {envelope} envelope needs a JSON request body: {exc}") from None
        except RecursionError:
            raise bad_request(f"the {envelope} envelope's JSON body is nested too deeply to decode "
                              f"(Python's recursion limit {sys.getrecursionlimit()})") from None
    if not isinstance(body, dict):
        raise bad_request(f"the {envelope} envelope needs a JSON object body, got {type(body).__name__}")
    return body


def split_by_lengths(items: list[Any], lengths: list[int]) -> list[list[Any]]:
    out, cursor = [], 0
    for n in lengths:
        out.append(items[cursor:cursor + n])
        cursor += n
    return out
