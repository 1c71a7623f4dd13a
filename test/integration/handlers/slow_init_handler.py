"""Test handler whose initialize takes a few seconds (TSERVE_TEST_INIT_SECONDS, default 4): a
window in which the server must not call itself ready (docs/reliability.md)."""

from __future__ import annotations

import os
import time
from typing import Any


class SlowInitHandler:
    def initialize(self, context: Any) -> None:
        time.sleep(float(os.environ.get("TSERVE_TEST_INIT_SECONDS", "4")))

    def handle(self, data: list[Any], context: Any) -> list[Any]:
        return ["ok" for _ in data]
