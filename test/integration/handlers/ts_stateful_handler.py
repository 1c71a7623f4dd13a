"""A TorchServe-0.12-style handler for sequence continuous batching (sequenceBatching +
continuousBatching), in the pattern of TorchServe's stateful sequence-continuous example:
``context.cache`` holds each sequence's status (keyed by sequence id) and each request's streaming
status (keyed by request id), a per-request stopping criterion decides the stream, and the
handler ends a sequence with the ``ts_request_sequence_end`` answer header.

Each request's body is an integer added to the sequence's running total, which is the answer:
the sequence's first request answers at once, an odd number streams the total ``STREAM_STEPS``
more times, an even one answers at once, 0 answers at once and ends the sequence.
"""

from __future__ import annotations

from ts.torch_handler.base_handler import BaseHandler

STREAM_STEPS = 3


class StatefulHandler(BaseHandler):
    def initialize(self, ctx) -> None:
        ctx.cache = {}
        self.totals: dict[str, int] = {}  # the model's state: each sequence's running total
        self.initialized = True

    def preprocess(self, data):
        results = []
        for idx, row in enumerate(data):
            sequence_id = self.context.get_sequence_id(idx)
            self.context.set_response_header(idx, self.context.header_key_sequence_id, sequence_id)
            if self.context.get_request_header(idx, self.context.header_key_sequence_start):
                self.totals[sequence_id] = 0
                self.context.cache[sequence_id] = {"start": True, "end": False}
            req_id = self.context.get_request_id(idx)
            if req_id in self.context.cache:  # a running stream, re-sent with no input
                results.append(self.totals[sequence_id])
                continue
            value = int(row.get("data") or row.get("body"))
            self.context.cache[req_id] = {"criteria": self._create_stopping_criteria(req_id, sequence_id),
                                          "stream": value % 2 == 1}
            self.totals[sequence_id] += value
            if value == 0:
                self.context.cache[sequence_id]["end"] = True
                self.context.cache[req_id]["stream"] = False
                self.context.set_response_header(idx, self.context.header_key_sequence_end, sequence_id)
            results.append(self.totals[sequence_id])
        return results

    def inference(self, data, *args, **kwargs):
        return data

    def postprocess(self, data):
        self.context.stopping_criteria = [
            self.context.cache[req_id]["criteria"] for req_id in self.context.request_ids.values()
        ]
        return data

    def _create_stopping_criteria(self, req_id, seq_id):
        cache = self.context.cache
        left = [STREAM_STEPS]

        def criteria(_result):
            if cache[seq_id]["end"]:  # sequence end: answer once, drop the sequence's state
                del cache[req_id], cache[seq_id]
                self.totals.pop(seq_id, None)
                return None
            if cache[seq_id]["start"] or not cache[req_id]["stream"]:
                cache[seq_id]["start"] = False
                del cache[req_id]
                return None  # not streamed: the answer ends the request
            if left[0] == 0:
                del cache[req_id]
                return True
            left[0] -= 1
            return False

        return criteria
