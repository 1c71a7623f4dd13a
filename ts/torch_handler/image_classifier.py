"""image_classifier: Resize 256, CenterCrop 224, ImageNet normalisation, top-k {label: prob}."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ts.context import Context
from ts.torch_handler.vision_handler import VisionHandler
from ts.utils.transforms import IMAGENET_MEAN, IMAGENET_STD, CenterCrop, Compose, Normalize, Resize, ToTensor, to_rgb
from ts.utils.util import map_class_to_label


class ImageClassifier(VisionHandler):
    topk = 5
    image_processing = Compose([to_rgb, Resize(256), CenterCrop(224), ToTensor(), Normalize(IMAGENET_MEAN, IMAGENET_STD)])

    def initialize(self, context: Context) -> None:
        super().initialize(context)
        topk = (self.model_yaml_config.get("handler") or {}).get("topk")
        if topk is not None:
            self.set_max_result_classes(int(topk))

    def set_max_result_classes(self, topk: int) -> None:
        self.topk = topk

    def get_max_result_classes(self) -> int:
        return self.topk

    def postprocess(self, data: torch.Tensor) -> list[dict[str, Any]]:
        ps = F.softmax(data, dim=1)
        probs, classes = torch.topk(ps, min(self.topk, ps.shape[1]), dim=1)
        return map_class_to_label(probs.tolist(), self.mapping, classes.tolist())
