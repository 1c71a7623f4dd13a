"""A custom handler: bag-of-words sentiment scores for short English texts.

It shows the TorchServe handler contract: `initialize` builds the model from the archive,
`preprocess` turns request items into a tensor, `inference` runs it, `postprocess` returns
one JSON-able result per request.
"""

import json
import re
from pathlib import Path

import torch

from ts.torch_handler.base_handler import BaseHandler

WORD = re.compile(r"[a-z']+")


class SentimentHandler(BaseHandler):
    def initialize(self, context) -> None:
        model_dir = Path(context.system_properties["model_dir"])
        self.vocab = json.loads((model_dir / "vocab.json").read_text())
        self.model = torch.jit.load(str(model_dir / context.manifest["model"]["serializedFile"]))
        self.model.eval()
        self.initialized = True

    def preprocess(self, data):
        rows = []
        for item in data:
            text = item.get("data") or item.get("body") or b""
            if isinstance(text, (bytes, bytearray)):
                text = text.decode("utf-8")
            if isinstance(text, dict):
                text = text.get("text", "")
            counts = torch.zeros(len(self.vocab))
            for word in WORD.findall(str(text).lower()):
                if word in self.vocab:
                    counts[self.vocab[word]] += 1
            rows.append(counts)
        return torch.stack(rows)

    def inference(self, data, *args, **kwargs):
        with torch.inference_mode():
            return torch.softmax(self.model(data), dim=1)

    def postprocess(self, data):
        return [{"negative": round(float(p[0]), 4), "positive": round(float(p[1]), 4)} for p in data]
