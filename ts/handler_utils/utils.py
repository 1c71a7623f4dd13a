"""Streaming helpers: intermediate responses become CHUNK frames."""

from __future__ import annotations

from typing import Any

from ts.context import Context
from ts.service import STREAM_HEADER, build_responses


def send_intermediate_predict_response(ret: list[Any], req_id_map: dict[int, str], message: str,
                                       code: int, context: Context) -> bool:
    """Send ``ret`` (one item per request of the batch) now, as one CHUNK frame.

    Matches TorchServe's signature; ``message``/``code`` become each entry's status unless the
    handler set one. Only rank 0 sends. Returns True when a frame was sent.
    """
    if len(ret) != len(req_id_map):
        raise ValueError(f"intermediate response has {len(ret)} items for a batch of "
                         f"{len(req_id_map)} requests")
    if getattr(context, "rank", 0) != 0:
        return False
    sender = getattr(context, "stream_sender", None)
    if sender is None:
        raise RuntimeError("send_intermediate_predict_response needs a running tserve worker "
                           "(context.stream_sender is not set)")
    for idx in range(len(ret)):
        context.set_response_header(idx, STREAM_HEADER, "true")
        proc = context.request_processor[idx]
        if proc.get_response_status_code() == 200 and code != 200:
            proc.report_status(code, message)
    sender(build_responses(list(ret), context, final=False))
    return True
