"""Image classifier whose preprocess is deliberately CPU-heavy (decode, blur passes, resize,
normalise), so that a preprocess pool visibly keeps the inference stage busy.

model-config.yaml ``handler.blur_passes`` tunes the cost (0 = plain image_classifier preprocess).
"""

from __future__ import annotations

import io
from typing import Any

import torch
from PIL import Image, ImageFilter

from ts.torch_handler.image_classifier import ImageClassifier
from ts.utils.transforms import to_rgb


class PipelineImageClassifier(ImageClassifier):
    blur_passes = 0

    def initialize(self, context: Any) -> None:
        super().initialize(context)
        self.initialize_preprocess(context)

    def initialize_preprocess(self, context: Any) -> None:
        """Runs in each preprocess-pool process (and in initialize): read the cost knob only."""
        super().initialize_preprocess(context)
        self.blur_passes = int((context.model_yaml_config.get("handler") or {}).get("blur_passes", 0))

    def preprocess(self, data: list[dict[str, Any]]) -> torch.Tensor:
        images = []
        for idx, row in enumerate(data):
            raw = row.get("data") or row.get("body")
            if not isinstance(raw, (bytes, bytearray)):
                images.append(self.decode_image(raw, idx))
                continue
            img = to_rgb(Image.open(io.BytesIO(raw)))
            for _ in range(self.blur_passes):
                img = img.filter(ImageFilter.GaussianBlur(radius=2))
            images.append(self.image_processing(img))
        return torch.stack(images)
