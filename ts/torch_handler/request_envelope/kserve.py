"""KServe v1 envelope: {"instances": [...]} in, {"predictions"|"explanations": [...]} out.

TorchServe answers only the batch's first request; tserve answers each request with its
own instances' results (identical for a batch of one).
"""

from __future__ import annotations

from typing import Any

from ts.torch_handler.request_envelope.base import BaseEnvelope, bad_request, request_body, split_by_lengths


class KServeEnvelope(BaseEnvelope):
    def __init__(self, handle_fn: Any) -> None:
        super().__init__(handle_fn)
        self._lengths: list[int] = []

    def parse_input(self, data: list[Any]) -> list[Any]:
        batches = []
        for row in data:
            body = request_body(row, "kserve")
            if "instances" not in body:
                raise bad_request('the kserve envelope needs the key "instances" in the request body: '
                                  f'{{"instances": [...]}} (got keys {sorted(body)})')
            instances = body["instances"]
            if not isinstance(instances, list):
                raise bad_request(f'"instances" must be a list in the kserve envelope, got {type(instances).__name__}')
            batches.append(instances)
        self._lengths = [len(b) for b in batches]
        return [item for b in batches for item in b]

    def format_output(self, data: list[Any]) -> list[dict[str, Any]]:
        if len(data) != sum(self._lengths):
            raise ValueError(f"handler returned {len(data)} results for {sum(self._lengths)} instances")
        out = []
        for idx, chunk in enumerate(split_by_lengths(list(data), self._lengths)):
            explain = self.context is not None and self.context.get_request_header(idx, "explain") == "True"
            out.append({"explanations" if explain else "predictions": chunk})
        return out
