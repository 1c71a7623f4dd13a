"""Request handling of the large-model examples: text in, greedily generated text out.

Mixed into each example's handler in front of a distributed base handler. Tokens are UTF-8
bytes (the tiny model's vocabulary is 256), so no tokenizer download is needed.

Request body: plain text, or JSON ``{"prompt": "...", "max_new_tokens": 8,
"return_logits": false}``. Response: ``{"prompt", "generated_ids", "text"}`` plus ``logits``
(the first generated position's scores) when asked. Bad
requests fail the batch with status 400 and a message naming the request.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from ts.handler_utils.distributed.generation import greedy_generate
from ts.utils.util import PredictionException

DEFAULT_MAX_NEW_TOKENS = 8


def _text(row: dict[str, Any]) -> Any:
    body = row.get("data")
    if body is None:
        body = row.get("body")
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8")
    if isinstance(body, str):
        stripped = body.strip()
        if stripped.startswith("{"):
            try:
                return json.loads(stripped)
            except ValueError:
                return body
    return body


class ByteLMMixin:
    """preprocess / inference / postprocess for byte-level greedy generation."""

    handler_config: dict[str, Any]

    def max_positions(self) -> int:
        limit = self.handler_config.get("max_length")
        model = getattr(self, "model", None)
        config_limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        traced = getattr(self, "max_length", None)  # the pipeline handler's traced length
        return min(v for v in (limit, config_limit, traced, 10**9) if v)

    def preprocess(self, data: list[dict[str, Any]]) -> dict[str, Any]:
        default_new = int(self.handler_config.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
        prompts, new_tokens, want_logits = [], [], []
        for idx, row in enumerate(data):
            req = _text(row)
            if isinstance(req, str):
                req = {"prompt": req}
            if not isinstance(req, dict) or not isinstance(req.get("prompt"), str) or not req["prompt"]:
                raise PredictionException(f"request {idx}: send a non-empty text body or JSON "
                                          '{"prompt": "...", "max_new_tokens": N}', 400)
            n = req.get("max_new_tokens", default_new)
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise PredictionException(
                    f"request {idx}: max_new_tokens must be a positive integer, got {n!r}", 400)
            ids = list(req["prompt"].encode("utf-8"))
            limit = self.max_positions()
            if len(ids) + n > limit:
                raise PredictionException(
                    f"request {idx}: prompt ({len(ids)} tokens) + max_new_tokens ({n}) exceeds the "
                    f"model's {limit} positions", 400)
            prompts.append(ids)
            new_tokens.append(n)
            want_logits.append(bool(req.get("return_logits", False)))
        return {"prompts": prompts, "max_new_tokens": new_tokens, "return_logits": want_logits}

    def inference(self, data: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        # Runs on every rank with rank 0's payload.
        result = greedy_generate(self.forward, data["prompts"], max(data["max_new_tokens"]))
        return {**data, "generated": result.tokens, "first_logits": result.first_logits}

    def postprocess(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for i, prompt in enumerate(data["prompts"]):
            ids = data["generated"][i][: data["max_new_tokens"][i]]
            item: dict[str, Any] = {
                "prompt": bytes(prompt).decode("utf-8"),
                "generated_ids": ids,
                "text": bytes(ids).decode("utf-8", errors="replace"),
            }
            if data["return_logits"][i]:
                logits: torch.Tensor = data["first_logits"][i]
                item["logits"] = [round(float(v), 6) for v in logits]
            out.append(item)
        return out
