"""Echo: returns each request's body unchanged. Measures the server, not the model."""

from __future__ import annotations

from typing import Any


def handle(data: list[dict[str, Any]] | None, context: Any) -> list[bytes] | None:
    if data is None:  # TorchServe calls the entry point once at load time with no data
        return None
    return [bytes(row.get("body") or row.get("data") or b"") for row in data]
