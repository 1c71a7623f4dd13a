"""Progress lines on stderr while big inputs are archived: one per 10 %, with MB done/total."""

from __future__ import annotations

import sys
from typing import TextIO

MB = 1_000_000
# Below this much input an archive takes a second or two: no progress lines.
PROGRESS_MIN_BYTES = 100 * MB


class Progress:
    """Counts bytes copied and prints a line each time another 10 % is done."""

    def __init__(
        self,
        total: int,
        label: str,
        stream: TextIO | None = None,
        min_bytes: int = PROGRESS_MIN_BYTES,
    ) -> None:
        self.total = total
        self.label = label
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = total >= min_bytes and total > 0
        self._next_pct = 10

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        if not self._enabled:
            return
        pct = min(100, self.done * 100 // self.total)
        if pct < self._next_pct:
            return
        # One line per crossing, even when a single chunk jumps several steps.
        while self._next_pct <= pct:
            self._next_pct += 10
        shown = self._next_pct - 10
        self._stream.write(
            f"torch-model-archiver: {self.label}: {shown}% "
            f"({self.done // MB}/{self.total // MB} MB)\n"
        )
        self._stream.flush()
