"""VisionHandler: image bytes / base64 string / float list -> batched tensor."""

from __future__ import annotations

import base64
import binascii
import io
from abc import ABC
from typing import Any

import torch
from PIL import Image, UnidentifiedImageError

from ts.context import Context
from ts.torch_handler.base_handler import BaseHandler


class VisionHandler(BaseHandler, ABC):
    image_processing: Any = None

    def initialize(self, context: Context) -> None:
        super().initialize(context)
        self._apply_pixel_limit(context)

    def initialize_preprocess(self, context: Context) -> None:
        """Preprocess-pool hook: only Pillow's pixel limit is needed to decode images."""
        self._apply_pixel_limit(context)

    @staticmethod
    def _apply_pixel_limit(context: Context) -> None:
        if not context.system_properties.get("limit_max_image_pixels", True):
            Image.MAX_IMAGE_PIXELS = None

    def decode_image(self, image: Any, idx: int) -> torch.Tensor:
        if isinstance(image, str):
            try:
                image = base64.b64decode(image, validate=True)
            except binascii.Error:
                raise ValueError(f"request {idx}: the string input is not base64; send the image "
                                 "bytes, a base64 string or a list of floats") from None
        if isinstance(image, (bytes, bytearray)):
            try:
                img = Image.open(io.BytesIO(image))
                img.load()
            except (UnidentifiedImageError, OSError) as exc:
                raise ValueError(f"request {idx}: cannot decode the image ({exc})") from None
            # As decoded (TorchServe's contract): a grayscale model's transform gets mode "L";
            # the built-in handlers convert to RGB in their own image_processing.
            tensor: torch.Tensor = self.image_processing(img)
            return tensor
        if image is None:
            raise ValueError(f"request {idx} has no 'data' or 'body' input")
        return torch.as_tensor(image, dtype=torch.float32)

    def preprocess(self, data: list[dict[str, Any]]) -> torch.Tensor | list[torch.Tensor]:
        images = [self.decode_image(row.get("data") or row.get("body"), i) for i, row in enumerate(data)]
        if all(img.shape == images[0].shape for img in images):
            return torch.stack(images).to(self.device)
        return [img.to(self.device) for img in images]  # detection models take a list

    def get_insights(self, tensor_data: torch.Tensor, _: Any, target: int = 0) -> list[Any]:
        from ts.utils.attribution import integrated_gradients

        return integrated_gradients(self.model, tensor_data, target=target, n_steps=15).tolist()
