"""body envelope: passes requests and results through unchanged."""

from typing import Any

from ts.torch_handler.request_envelope.base import BaseEnvelope


class BodyEnvelope(BaseEnvelope):
    def parse_input(self, data: Any) -> Any:
        return data

    def format_output(self, data: Any) -> Any:
        return data
