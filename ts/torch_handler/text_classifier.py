"""text_classifier: an EmbeddingBag-style model(text, offsets); one request at a time, as in TorchServe."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ts.torch_handler.text_handler import TextHandler, ngrams_iterator
from ts.utils.util import map_class_to_label


class TextClassifier(TextHandler):
    ngrams = 2

    def preprocess(self, data: list[dict[str, Any]]) -> torch.Tensor:
        text = self._text_of(data[0])  # TorchServe's text classifier does not batch
        text = self._remove_accented_characters(text)
        text = self._remove_html_tags(text)
        text = text.lower()
        text = self._expand_contractions(text)
        text = self._remove_puncutation(text)
        tokens = self._tokenize(text)
        if self.source_vocab is None:
            raise RuntimeError("source_vocab.pt is missing from the model archive")
        return torch.as_tensor([self.source_vocab[t] for t in ngrams_iterator(tokens, self.ngrams)],
                               dtype=torch.long, device=self.device)

    def inference(self, data: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        offsets = torch.as_tensor([0], device=self.device)
        logits: torch.Tensor = super().inference(data, offsets)
        return logits

    def postprocess(self, data: torch.Tensor) -> list[dict[str, float]]:
        return map_class_to_label(F.softmax(data, dim=1).tolist(), self.mapping)

    def get_insights(self, text_preprocess: torch.Tensor, _: Any, target: int = 0) -> list[dict[str, Any]]:
        from ts.utils.attribution import EmbeddedHead, integrated_gradients

        embedding = self.model.embedding if hasattr(self.model, "embedding") else None
        if embedding is None:
            raise RuntimeError("explanations need a model with an 'embedding' layer")
        emb = embedding(text_preprocess).unsqueeze(0)
        head = EmbeddedHead(self.model)
        attributions = integrated_gradients(head, emb, target=target, n_steps=15)
        importances = self.summarize_attributions(attributions)
        return [{"words": [str(i) for i in text_preprocess.tolist()], "importances": importances.tolist(),
                 "delta": 0.0}]

