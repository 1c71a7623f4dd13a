"""Conversations of a stateful LLM model (``sequenceBatching: true``): each sequence (a chat
session) keeps the token ids of its turns so far, and a new turn's prompt is appended to them.

The frontend runs a sequence's requests one at a time and in order, so a turn always sees the
whole of the turn before it. What the model is given for a turn is exactly: the earlier turns'
prompt ids and generated ids, in order, then this turn's own prompt ids (as the request form
tokenized them: a chat request's template output, a plain prompt's tokens). A turn that did
not finish (cancelled, refused, failed) leaves the conversation as it was. The rectangle KV cache
is not kept between turns: each turn prefills the whole conversation again; with the paged cache
(``handler.paged_kv_cache``) the earlier turns' full blocks stay pinned between turns
(``ts/llm/engine/paged/pins.py``, until SEQUENCE_END or the pool needs them), so a turn computes only
what follows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEQUENCE_ID = "ts_request_sequence_id"
SEQUENCE_START = "ts_request_sequence_start"
COMPLETED = frozenset({"stop", "length"})  # finish reasons of a turn that joins the conversation


@dataclass
class _Turn:
    sequence: str
    prompt_ids: list[int]
    output_ids: list[int] = field(default_factory=list)


class Conversations:
    """Token ids per open sequence, and the turns running now (by request id)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled  # only for stateful models: elsewhere the header is just a header
        self._history: dict[str, list[int]] = {}
        self._turns: dict[str, _Turn] = {}

    def prompt(self, request_id: str, headers: dict[str, str] | None, prompt_ids: list[int]) -> list[int]:
        """The ids the model is given for this turn; remembers the turn until it ends."""
        sequence = (headers or {}).get(SEQUENCE_ID) if self.enabled else None
        if not sequence:
            return list(prompt_ids)
        if (headers or {}).get(SEQUENCE_START, "").lower() == "true":
            self._history.pop(sequence, None)
        ids = self._history.get(sequence, []) + list(prompt_ids)
        self._turns[request_id] = _Turn(sequence, ids)
        return ids

    def sequence_of(self, request_id: str) -> str | None:
        """The sequence a running turn belongs to (None: not a stateful turn)."""
        turn = self._turns.get(request_id)
        return turn.sequence if turn is not None else None

    def generated(self, request_id: str, token_ids: list[int]) -> None:
        turn = self._turns.get(request_id)
        if turn is not None:
            turn.output_ids.extend(token_ids)

    def finished(self, request_id: str, completed: bool) -> None:
        """The turn ended; a completed one (stop or length) becomes the sequence's history."""
        turn = self._turns.pop(request_id, None)
        if turn is not None and completed:
            self._history[turn.sequence] = turn.prompt_ids + turn.output_ids

    def end(self, sequence: str) -> None:
        """The frontend closed the sequence (SEQUENCE_END): forget it."""
        self._history.pop(sequence, None)

    def held(self) -> int:
        return len(self._history)
