"""image_segmenter: per pixel (class index, probability) from the model's ``out`` map."""

from __future__ import annotations

from typing import Any

import torch

from ts.torch_handler.vision_handler import VisionHandler
from ts.utils.transforms import IMAGENET_MEAN, IMAGENET_STD, Compose, Normalize, ToTensor, to_rgb


class ImageSegmenter(VisionHandler):
    image_processing = Compose([to_rgb, ToTensor(), Normalize(IMAGENET_MEAN, IMAGENET_STD)])

    def postprocess(self, data: Any) -> list[Any]:
        # torchvision segmentation models return {"out": [N, C, H, W], "aux": ...}
        if isinstance(data, dict):
            if "out" not in data:
                raise ValueError(f"segmentation model returned keys {sorted(data)}; expected 'out'")
            data = data["out"]
        probs = torch.nn.functional.softmax(data, dim=1)
        best = torch.max(probs, dim=1)
        return torch.stack([best.indices.type(best.values.dtype), best.values], dim=3).tolist()
