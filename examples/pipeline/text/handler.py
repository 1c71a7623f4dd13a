"""Text classifier whose tokenizer lives in ``initialize_preprocess``.

The preprocess pool never calls ``initialize`` (it would load the model once per process);
everything ``preprocess`` needs -- here the vocabulary and tokenizer -- is built in
``initialize_preprocess``, which ``initialize`` also calls so the handler works without a pool.
Preprocess returns flat token ids + offsets (a batch for nn.EmbeddingBag) as tensors, which
reach the inference process through shared memory.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import torch
import torch.nn.functional as F

from ts.torch_handler.base_handler import BaseHandler
from ts.utils.util import map_class_to_label

_WORD = re.compile(r"[a-z0-9']+")


class VocabTokenizer:
    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.unk = vocab.get("<unk>", 0)

    def __call__(self, text: str) -> list[int]:
        ids = [self.vocab.get(w, self.unk) for w in _WORD.findall(text.lower())]
        return ids or [self.unk]


class PipelineTextClassifier(BaseHandler):
    def initialize(self, context: Any) -> None:
        super().initialize(context)
        self.initialize_preprocess(context)

    def initialize_preprocess(self, context: Any) -> None:
        model_dir = context.system_properties["model_dir"]
        with open(os.path.join(model_dir, "vocab.json"), encoding="utf-8") as f:
            self.tokenizer = VocabTokenizer(json.load(f))

    def preprocess(self, data: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        tokens: list[int] = []
        offsets: list[int] = []
        for idx, row in enumerate(data):
            text = row.get("data") or row.get("body")
            if isinstance(text, (bytes, bytearray)):
                text = text.decode("utf-8")
            if isinstance(text, dict):
                text = text.get("text")
            if not isinstance(text, str):
                raise ValueError(f"request {idx}: send the text as text/plain or as {{\"text\": ...}}")
            offsets.append(len(tokens))
            tokens.extend(self.tokenizer(text))
        return {"tokens": torch.tensor(tokens, dtype=torch.long), "offsets": torch.tensor(offsets, dtype=torch.long)}

    def inference(self, data: dict[str, torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
        with torch.inference_mode():
            return self.model(data["tokens"].to(self.device), data["offsets"].to(self.device))

    def postprocess(self, data: torch.Tensor) -> list[dict[str, float]]:
        return map_class_to_label(F.softmax(data, dim=1).tolist(), self.mapping)
