"""Test handler for useVenv: reports the interpreter's environment and a module the model's requirements installed."""

from __future__ import annotations

import json
import sys
from typing import Any


def handle(data: list[dict[str, Any]] | None, context: Any) -> list[Any]:
    if data is None:
        return []
    import torch  # from the server's environment, visible behind the venv's own packages
    import tserve_tiny_dep  # installed into the model's venv at registration

    info = {"prefix": sys.prefix, "executable": sys.executable, "greeting": tserve_tiny_dep.greet(),
            "torch": torch.__version__}
    return [json.dumps(info) for _ in data]
