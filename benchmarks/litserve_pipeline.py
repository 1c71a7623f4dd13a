"""LitServe 0.2.19 peer for the preprocess-pipeline scenario (run by the bench venv's Python).

Same costs as ``handlers/pipeline_handler.py``: ``batch()`` (LitServe's batch-level preprocess
hook, run in the inference worker) burns P ms of CPU, ``predict`` sleeps I ms.

Usage: python litserve_pipeline.py PORT PREPROCESS_MS INFERENCE_MS BATCH_SIZE DELAY_MS
"""

from __future__ import annotations

import sys
import time
from typing import Any

import litserve as ls


def _spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


class PipelineAPI(ls.LitAPI):
    def __init__(self, preprocess_ms: float, inference_ms: float, batch: int, delay_s: float):
        super().__init__(max_batch_size=batch, batch_timeout=delay_s)
        self.preprocess_ms = preprocess_ms
        self.inference_ms = inference_ms

    def setup(self, device: str) -> None:
        pass

    def decode_request(self, request, **kwargs: Any) -> Any:  # noqa: ANN001 (LitServe reads the hint)
        return request

    def batch(self, inputs: list[Any]) -> list[Any]:
        _spin(self.preprocess_ms)
        return inputs

    def predict(self, x: list[Any], **kwargs: Any) -> list[float]:
        time.sleep(self.inference_ms / 1000.0)
        return [16.0] * len(x)

    def unbatch(self, output: list[float]) -> list[float]:
        return output

    def encode_response(self, output: float, **kwargs: Any) -> dict[str, float]:
        return {"output": output}


def main() -> None:
    port, pre, inf, batch, delay = sys.argv[1:6]
    api = PipelineAPI(float(pre), float(inf), int(batch), int(delay) / 1000.0)
    server = ls.LitServer(api, accelerator="cpu", workers_per_device=1)
    server.run(host="127.0.0.1", port=int(port), num_api_servers=1, log_level="warning",
               generate_client_file=False)


if __name__ == "__main__":
    main()
