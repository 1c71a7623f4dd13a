"""A TorchServe-0.12-style module handler for continuous batching that streams within one step:
``send_intermediate_predict_response`` sends ``p0 ``..``p<k-1> `` for every request of the batch,
then the returned answer ends each request (no stopping criteria: TorchServe's rule turns the
``ts_stream_next: true`` the intermediate sends left into ``false``)."""

from __future__ import annotations

import json
from typing import Any

from ts.handler_utils.utils import send_intermediate_predict_response

PIECES = 3


def handle(data: list[dict[str, Any]] | None, context) -> list[Any] | None:
    if data is None:  # TorchServe initialises a module handler with handle(None, context)
        return None
    for k in range(PIECES):
        send_intermediate_predict_response([f"p{k} "] * len(data), context.request_ids, "Intermediate",
                                           200, context)
    return [json.dumps({"cached": row == {}}) for row in data]
