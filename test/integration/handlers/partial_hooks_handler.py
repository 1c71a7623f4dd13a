"""A handler with only some of the continuous-batching hooks: its load is refused naming the rest."""

from __future__ import annotations


class PartialHooksHandler:
    def initialize(self, context) -> None:
        self.queue: list[str] = []

    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        self.queue.append(request_id)

    def step(self) -> list:
        return []

    def handle(self, data, context) -> list:
        return [b"" for _ in data]
