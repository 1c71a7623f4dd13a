"""Test handler whose initialize fails, to check that load errors reach the client."""

from __future__ import annotations

from typing import Any


class BrokenHandler:
    def initialize(self, context: Any) -> None:
        raise ValueError("broken handler: weights file missing (intentional)")

    def handle(self, data: list[Any], context: Any) -> list[Any]:
        return data
