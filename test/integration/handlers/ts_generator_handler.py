"""A continuous-batching handler written for TorchServe 0.12 (no tserve hooks), the way
TorchServe's examples write one: ``context.cache`` keyed by request id, prefill on a request's
first sight, one token per step for every running request, ``context.stopping_criteria`` set in
postprocess, and the state of requests that stopped being re-sent (their client left) dropped.

Body (JSON): ``n`` tokens to make, optional ``step_ms`` per step, ``fail: true`` to raise at prefill.
Each step answers ``t<k> `` per request; after ``n`` tokens the last answer is a JSON summary
of what the request saw (its steps' batch sizes, how often it came back as a cached entry).
"""

from __future__ import annotations

import json
import logging
import time

from ts.torch_handler.base_handler import BaseHandler

logger = logging.getLogger(__name__)


class GeneratorHandler(BaseHandler):
    def initialize(self, ctx) -> None:
        ctx.cache = {}
        self.steps = 0
        self.initialized = True

    def preprocess(self, requests):
        self.steps += 1
        req_ids = list(self.context.request_ids.values())
        self._clean_dead_reqs(req_ids)
        for req_id, row in zip(req_ids, requests, strict=True):
            if req_id not in self.context.cache:
                body = row.get("data") or row.get("body")
                if isinstance(body, (bytes, bytearray)):
                    body = json.loads(body)
                if body.get("fail"):
                    raise ValueError(f"prefill refused request {req_id}: fail was asked for")
                self.context.cache[req_id] = {
                    "n": int(body["n"]), "made": 0, "step_ms": float(body.get("step_ms", 0)),
                    "joined_step": self.steps, "batch_sizes": [], "cached_rows": 0,
                    "stopping_criteria": self._create_stopping_criteria(req_id),
                }
            elif row == {}:  # a running request comes back as a cached entry: headers only
                self.context.cache[req_id]["cached_rows"] += 1
            self.context.cache[req_id]["batch_sizes"].append(len(requests))
        return req_ids

    def inference(self, req_ids):
        pause = max(self.context.cache[r]["step_ms"] for r in req_ids)
        if pause:
            time.sleep(pause / 1000)
        out = []
        for req_id in req_ids:
            state = self.context.cache[req_id]
            if state["made"] < state["n"]:
                out.append(f"t{state['made']} ")
                state["made"] += 1
            else:
                out.append(json.dumps({
                    "tokens": state["made"], "joined_step": state["joined_step"],
                    "batch_sizes": state["batch_sizes"], "cached_rows": state["cached_rows"],
                    "cache_size": len(self.context.cache),
                }))
        return out

    def postprocess(self, outputs):
        self.context.stopping_criteria = [
            self.context.cache[req_id]["stopping_criteria"] for req_id in self.context.request_ids.values()
        ]
        return outputs

    def _clean_dead_reqs(self, req_ids) -> None:
        for req_id in [r for r in self.context.cache if r not in req_ids]:
            logger.info("request %s is no longer sent: dropping its state", req_id)
            del self.context.cache[req_id]

    def _create_stopping_criteria(self, req_id):
        def stop(output) -> bool:
            done = isinstance(output, str) and output.startswith("{")
            if done:
                del self.context.cache[req_id]
            return done

        return stop
