"""object_detector: [{label: [x1, y1, x2, y2], "score": s}] for detections scoring >= 0.5."""

from __future__ import annotations

from typing import Any

from ts.torch_handler.vision_handler import VisionHandler
from ts.utils.transforms import Compose, ToTensor, to_rgb


class ObjectDetector(VisionHandler):
    image_processing = Compose([to_rgb, ToTensor()])
    threshold = 0.5

    def postprocess(self, data: Any) -> list[list[dict[str, Any]]]:
        # torchvision detection models return one {"boxes", "labels", "scores"} dict per image
        if isinstance(data, dict):
            data = [data]
        result = []
        for i, row in enumerate(data):
            missing = {"boxes", "labels", "scores"} - set(row)
            if missing:
                raise ValueError(f"detection output {i} lacks {sorted(missing)}; expected a dict "
                                 "with boxes, labels and scores per image")
            keep = row["scores"] >= self.threshold
            boxes, labels, scores = (row[k][keep].tolist() for k in ("boxes", "labels", "scores"))
            result.append([
                {(self.mapping.get(str(c), str(c)) if self.mapping else str(c)): box, "score": score}
                for c, box, score in zip(labels, boxes, scores, strict=True)
            ])
        return result
