"""The ``context`` handed to handlers, with TorchServe 0.12's attributes and methods."""

from __future__ import annotations

import os
from typing import Any

from ts.metrics.metric_cache_abstract import MetricCacheAbstract
from ts.model_settings import ModelSettings


class RequestProcessor:
    """Request headers in, response status/headers out, for one request of a batch."""

    def __init__(self, request_header: dict[str, Any]) -> None:
        self._status_code = 200
        self._reason_phrase: str | None = None
        self._response_header: dict[str, str] = {}
        self._request_header = request_header

    def get_request_property(self, key: str) -> Any:
        return self._request_header.get(key)

    def get_request_properties(self) -> dict[str, Any]:
        return self._request_header

    def report_status(self, code: int, reason_phrase: str | None = None) -> None:
        self._status_code = int(code)
        self._reason_phrase = reason_phrase

    def get_response_status_code(self) -> int:
        return self._status_code

    def get_response_status_phrase(self) -> str | None:
        return self._reason_phrase

    def add_response_property(self, key: str, value: Any) -> None:
        self._response_header[key] = value

    def get_response_headers(self) -> dict[str, str]:
        return self._response_header

    def get_response_header(self, key: str) -> str | None:
        return self._response_header.get(key)

    # Used by the preprocess pool to carry a child's response changes back.
    def response_state(self) -> tuple[int, str | None, dict[str, str]]:
        return self._status_code, self._reason_phrase, dict(self._response_header)

    def apply_response_state(self, state: tuple[int, str | None, dict[str, str]]) -> None:
        self._status_code, self._reason_phrase, headers = state
        self._response_header.update(headers)


class Context:
    """Model-level properties plus the current batch's request and response state."""

    def __init__(self, model_name: str, model_dir: str, manifest: dict[str, Any] | None,
                 batch_size: int, gpu: int | None, mms_version: str,
                 limit_max_image_pixels: bool = True, metrics: MetricCacheAbstract | None = None,
                 model_yaml_config: dict[str, Any] | None = None, *, rank: int = 0,
                 local_rank: int = 0, world_size: int = 1, device: str = "cpu",
                 model_version: str | None = None, model_settings: ModelSettings | None = None) -> None:
        self.model_name = model_name
        self.model_version = model_version
        self.manifest = manifest
        self._system_properties = {
            "model_dir": model_dir,
            "gpu_id": gpu,
            "batch_size": batch_size,
            "server_name": "MMS",
            "server_version": mms_version,
            "limit_max_image_pixels": limit_max_image_pixels,
        }
        self.request_ids: dict[int, str] | None = None
        self.request_processor: list[RequestProcessor] = []
        self._metrics = metrics
        self._limit_max_image_pixels = limit_max_image_pixels
        # the archive's model-config.yaml as written (the handler's own sections: handler, pt2, ...)
        self.model_yaml_config = model_yaml_config or {}
        # the model's settings as the frontend resolved them (every layer, aliases folded): what the
        # worker runs with; read continuousBatching, parallelType, deviceType, ... here
        # (a Context built by hand, without LOAD: the settings of a model that sets nothing, LOAD's device rule)
        self.model_settings = model_settings if model_settings is not None else ModelSettings(
            batchSize=batch_size, deviceType="gpu" if gpu is not None and gpu >= 0 else "cpu")
        self.stopping_criteria: list[Any] | None = None
        self.cl_socket: Any = None  # kept for compatibility; tserve streams through a sender
        self.stream_sender: Any = None  # callable(batch responses) set by the worker per batch
        self.rank = rank
        self.local_rank = local_rank
        self.world_size = world_size
        self.device = device
        self.header_key_sequence_id = os.getenv("TS_REQUEST_SEQUENCE_ID", "ts_request_sequence_id")
        self.header_key_sequence_start = os.getenv("TS_REQUEST_SEQUENCE_START", "ts_request_sequence_start")
        self.header_key_sequence_end = os.getenv("TS_REQUEST_SEQUENCE_END", "ts_request_sequence_end")

    # ------------------------------------------------------------------ properties
    @property
    def system_properties(self) -> dict[str, Any]:
        return self._system_properties

    @property
    def request_processor_list(self) -> list[RequestProcessor]:
        return self.request_processor

    @property
    def metrics(self) -> MetricCacheAbstract | None:
        return self._metrics

    @metrics.setter
    def metrics(self, metrics: MetricCacheAbstract) -> None:
        self._metrics = metrics

    # ------------------------------------------------------------------ batch state
    def set_batch(self, request_ids: dict[int, str], processors: list[RequestProcessor]) -> None:
        self.request_ids = request_ids
        self.request_processor = processors
        if self._metrics is not None:
            self._metrics.request_ids = request_ids

    def _processor(self, idx: int) -> RequestProcessor:
        if not 0 <= idx < len(self.request_processor):
            raise IndexError(f"request index {idx} is out of range for a batch of "
                             f"{len(self.request_processor)} requests")
        return self.request_processor[idx]

    # ------------------------------------------------------------------ requests
    def get_request_id(self, idx: int = 0) -> str | None:
        return self.request_ids.get(idx) if self.request_ids else None

    def get_request_header(self, idx: int, key: str) -> Any:
        return self._processor(idx).get_request_property(key)

    def get_all_request_header(self, idx: int) -> dict[str, Any]:
        return self._processor(idx).get_request_properties()

    def get_sequence_id(self, idx: int) -> Any:
        return self._processor(idx).get_request_property(self.header_key_sequence_id)

    # ------------------------------------------------------------------ responses
    def set_response_content_type(self, idx: int, value: str) -> None:
        self.set_response_header(idx, "content-type", value)

    def get_response_content_type(self, idx: int) -> str | None:
        return self.get_response_headers(idx).get("content-type")

    def get_response_status(self, idx: int) -> tuple[int, str | None]:
        p = self._processor(idx)
        return p.get_response_status_code(), p.get_response_status_phrase()

    def set_response_status(self, code: int = 200, phrase: str = "", idx: int = 0) -> None:
        if self.request_processor:
            self._processor(idx).report_status(code, phrase)

    def set_all_response_status(self, code: int = 200, phrase: str = "") -> None:
        for p in self.request_processor:
            p.report_status(code, phrase)

    def get_response_headers(self, idx: int) -> dict[str, str]:
        return self._processor(idx).get_response_headers()

    def set_response_header(self, idx: int, key: str, value: str) -> None:
        self._processor(idx).add_response_property(key, value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Context) and self.__dict__ == other.__dict__
