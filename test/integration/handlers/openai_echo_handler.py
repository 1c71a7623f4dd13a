"""Test handler with the continuous-batching hooks that answers OpenAI's objects deterministically.

The "generation" of a request is its prompt's words (the last message's content for a chat), one
word per step, each step sleeping ``STEP_S``; ``max_tokens`` cuts it (finish_reason ``length``).
``stream: true`` answers OpenAI's Server-Sent Events (``stream_options.include_usage`` adds the
usage chunk). An empty prompt or an unknown parameter is refused with OpenAI's error shape and
status 400 (the frontend passes it through); the word ``__fail__`` ends the request with a bare
500 (no body: the frontend shapes the error, as one more SSE event in a stream). Without the ``x-tserve-openai`` header (a
TorchServe-style /predictions call) it answers ``{"text": <prompt>, "openai": null}``. Each
cancellation is printed (``openai-echo cancelled <id>``) for the tests to find in the model log.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

STEP_S = 0.05
KNOWN = {"model", "prompt", "messages", "max_tokens", "stream", "stream_options", "temperature", "n", "user"}


@dataclass
class Event:
    request_id: str
    chunk: bytes | None = None
    final: bytes | None = None
    status: int = 200
    content_type: str = ""
    message: str = ""


@dataclass
class _Sequence:
    kind: str | None
    words: list[str]
    limit: int
    stream: bool
    usage_chunk: bool
    created: int
    done: list[str] = field(default_factory=list)


class RefusedRequest(Exception):
    """A request refused with OpenAI's error body (status and body are read by the worker)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = 400
        self.body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                          "param": param, "code": None}}).encode()


class OpenAiEchoHandler:
    def initialize(self, context: Any) -> None:
        self.model_name = context.model_name
        self.running: dict[str, _Sequence] = {}

    def handle(self, data: Any, context: Any) -> list[Any]:  # not used with continuous batching
        return [{"text": "handle"} for _ in data or []]

    # ---------------------------------------------------------------- continuous-batching hooks
    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        kind = headers.get("x-tserve-openai")
        req = json.loads(body or b"{}")
        if kind is not None:
            unknown = sorted(set(req) - KNOWN)
            if unknown:
                raise RefusedRequest(f"Unrecognized request argument supplied: {unknown[0]}", unknown[0])
        if kind == "chat.completions":
            prompt = str(req.get("messages", [{}])[-1].get("content", ""))
        else:
            prompt = str(req.get("prompt", ""))
        words = prompt.split()
        if not words:
            raise RefusedRequest("The prompt is empty.", "messages" if kind == "chat.completions" else "prompt")
        limit = int(req.get("max_tokens") or len(words))
        stream = bool(req.get("stream")) and kind is not None
        usage_chunk = bool((req.get("stream_options") or {}).get("include_usage"))
        self.running[request_id] = _Sequence(kind, words, limit, stream, usage_chunk, int(time.time()))

    def has_work(self) -> bool:
        return bool(self.running)

    def cancel(self, request_id: str) -> None:
        if self.running.pop(request_id, None) is not None:
            print(f"openai-echo cancelled {request_id}", flush=True)

    def step(self) -> list[Event]:
        time.sleep(STEP_S)
        events = []
        for rid, seq in list(self.running.items()):
            word = seq.words[len(seq.done)]
            if word == "__fail__":  # ends the request with a bare error (the frontend shapes it)
                del self.running[rid]
                events.append(Event(rid, final=b"", status=500, message="generation failed at __fail__"))
                continue
            seq.done.append(word)
            finished = len(seq.done) >= min(seq.limit, len(seq.words))
            reason = "length" if len(seq.done) < len(seq.words) else "stop"
            ev = Event(rid)
            if seq.stream:
                ev.content_type = "text/event-stream"
                ev.chunk = _sse(self._chunk(rid, seq, word + ("" if finished else " "), None))
                if finished:
                    tail = _sse(self._chunk(rid, seq, "", reason))
                    if seq.usage_chunk:
                        tail += _sse({**self._head(rid, seq, True), "choices": [], "usage": _usage(seq)})
                    ev.final = tail + b"data: [DONE]\n\n"
            elif finished:
                ev.content_type = "application/json"
                ev.final = json.dumps(self._whole(rid, seq, reason)).encode()
            if finished:
                del self.running[rid]
            if ev.chunk is not None or ev.final is not None:
                events.append(ev)
        return events

    # ---------------------------------------------------------------- OpenAI's objects
    def _head(self, rid: str, seq: _Sequence, chunk: bool) -> dict[str, Any]:
        chat = seq.kind == "chat.completions"
        obj = ("chat.completion.chunk" if chunk else "chat.completion") if chat else "text_completion"
        return {"id": ("chatcmpl-" if chat else "cmpl-") + rid, "object": obj, "created": seq.created,
                "model": self.model_name}

    def _chunk(self, rid: str, seq: _Sequence, text: str, reason: str | None) -> dict[str, Any]:
        if seq.kind == "chat.completions":
            delta = {"role": "assistant", "content": text} if len(seq.done) == 1 and reason is None else (
                {"content": text} if text else {})
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        return {**self._head(rid, seq, True), "choices": [choice]}

    def _whole(self, rid: str, seq: _Sequence, reason: str) -> dict[str, Any]:
        text = " ".join(seq.done)
        if seq.kind is None:
            return {"text": text, "openai": None}
        if seq.kind == "chat.completions":
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                      "finish_reason": reason}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        return {**self._head(rid, seq, False), "choices": [choice], "usage": _usage(seq)}


def _usage(seq: _Sequence) -> dict[str, int]:
    return {"prompt_tokens": len(seq.words), "completion_tokens": len(seq.done),
            "total_tokens": len(seq.words) + len(seq.done)}


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"
