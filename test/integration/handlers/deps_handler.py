"""Test handler that imports a module installed per model from the archive's requirements."""

from __future__ import annotations

from typing import Any


def handle(data: list[dict[str, Any]] | None, context: Any) -> list[Any]:
    if data is None:
        return []
    import tserve_tiny_dep  # installed into <model tmp>/deps by the frontend

    return [tserve_tiny_dep.greet() for _ in data]
