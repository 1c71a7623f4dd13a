"""Reports how it is run and what it believes: ``pipeline`` is ``steps`` when the worker drives its
continuous-batching hooks, ``batch`` when it calls ``handle``; ``continuousBatching`` is the
resolved setting the handler reads (``context.model_settings``), ``yaml`` the archive's raw file."""

from __future__ import annotations

import json
from typing import Any

from ts.pipeline.step_handler import StepEvent


class SettingsViewHandler:
    def initialize(self, context: Any) -> None:
        self.context = context
        self.waiting: list[str] = []

    def _view(self, pipeline: str) -> str:
        raw = self.context.model_yaml_config
        return json.dumps({"pipeline": pipeline,
                           "continuousBatching": self.context.model_settings.continuousBatching,
                           "yaml": {k: raw[k] for k in ("continuousBatching", "asyncCommunication") if k in raw}})

    def handle(self, data: list[Any], context: Any) -> list[str]:
        return [self._view("batch") for _ in data]

    def add_request(self, request_id: str, body: bytes, headers: dict[str, str]) -> None:
        self.waiting.append(request_id)

    def has_work(self) -> bool:
        return bool(self.waiting)

    def cancel(self, request_id: str) -> None:
        self.waiting = [r for r in self.waiting if r != request_id]

    def step(self) -> list[StepEvent]:
        events = [StepEvent(r, final=self._view("steps").encode()) for r in self.waiting]
        self.waiting.clear()
        return events
