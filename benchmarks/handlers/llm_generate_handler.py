"""TorchServe's side of the LLM scenario: a stock batch-and-``generate`` handler.

What a TorchServe 0.12 user writes without continuous batching: the frontend collects up to
``batchSize`` requests (waiting at most ``maxBatchDelay``), the handler left-pads their prompts,
runs Hugging Face's greedy ``model.generate`` once for the whole batch with ``max_new_tokens`` =
the largest any request asked for, and answers every request when the batch is done (nothing is
streamed). Each answer is cut to its own ``max_new_tokens`` (and at EOS unless ``ignore_eos``).

Request: ``{"prompt": str, "max_new_tokens": int, "temperature": 0, "ignore_eos": bool}`` (other
keys, e.g. ``stream``, are ignored). Answer: ``{"text", "finish_reason", "usage"}``, the shape of
tserve's LLM handler. The model folder (``save_pretrained``) is the model dir itself.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import torch

from ts.torch_handler.base_handler import BaseHandler

logger = logging.getLogger(__name__)

DEFAULT_NEW_TOKENS = 32


def parse_request(row: dict[str, Any]) -> dict[str, Any]:
    """One request of the batch (``data`` or ``body``: a dict, JSON bytes or a plain prompt)."""
    raw = row.get("data") if row.get("data") is not None else row.get("body")
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = {"prompt": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("prompt"), str):
        raise ValueError("the body must be a JSON object with a string 'prompt'")
    return {"prompt": raw["prompt"],
            "max_new_tokens": int(raw.get("max_new_tokens", DEFAULT_NEW_TOKENS)),
            "ignore_eos": bool(raw.get("ignore_eos", False))}


def cut(new_ids: list[int], max_new_tokens: int, eos_ids: set[int],
        ignore_eos: bool) -> tuple[list[int], str]:
    """A row of ``generate``'s output (after the prompt) cut to what its request asked for."""
    ids = new_ids[:max_new_tokens]
    if not ignore_eos:
        for i, tok in enumerate(ids):
            if tok in eos_ids:
                return ids[:i], "stop"
    return ids, "length"


class BatchGenerateHandler(BaseHandler):
    def initialize(self, context: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model_dir = context.system_properties.get("model_dir")
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.eos_ids.add(self.tokenizer.eos_token_id)
        logger.info("batch-and-generate handler: %d torch threads", torch.get_num_threads())
        self.initialized = True

    def preprocess(self, data: list[dict[str, Any]]) -> dict[str, Any]:
        reqs = [parse_request(row) for row in data]
        enc = self.tokenizer([r["prompt"] for r in reqs], return_tensors="pt", padding=True)
        return {"reqs": reqs, "input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def inference(self, batch: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        reqs = batch["reqs"]
        extra = {"eos_token_id": None} if all(r["ignore_eos"] for r in reqs) else {}
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                do_sample=False, max_new_tokens=max(r["max_new_tokens"] for r in reqs),
                pad_token_id=self.tokenizer.pad_token_id, **extra)
        batch["new_ids"] = out[:, batch["input_ids"].shape[1]:].tolist()
        return batch

    def postprocess(self, batch: dict[str, Any]) -> list[str]:
        answers = []
        prompt_lens = batch["attention_mask"].sum(dim=1).tolist()
        for req, row, n_prompt in zip(batch["reqs"], batch["new_ids"], prompt_lens, strict=True):
            ids, reason = cut(row, req["max_new_tokens"], self.eos_ids, req["ignore_eos"])
            text = self.tokenizer.decode(ids, skip_special_tokens=True,
                                         clean_up_tokenization_spaces=False)
            answers.append(json.dumps({"text": text, "finish_reason": reason, "usage": {
                "prompt_tokens": n_prompt, "completion_tokens": len(ids),
                "total_tokens": n_prompt + len(ids)}}))
        return answers
