"""Runs one batch through a handler: decode the inputs as TorchServe does, call the entry
point, turn its return (or its exception) into one protocol Response per request."""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ts.context import Context, RequestProcessor
from ts.protocol.codec import Request, Response
from ts.utils.util import PredictionException

logger = logging.getLogger("ts.service")

Entry = Callable[[list[dict[str, Any]], Context], Any]
STREAM_HEADER = "ts_stream_next"
PREDICTION_METRIC = "PredictionTime"


class BatchError(Exception):
    """A batch-level failure: every request of the batch gets ``status`` and ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# json.loads recurses once per nesting level; past the interpreter's limit it raises RecursionError
JSON_DEPTH_LIMIT = sys.getrecursionlimit()


def decode_input_enabled() -> bool:
    return os.environ.get("TS_DECODE_INPUT_REQUEST", "true").lower() != "false"


def decode_value(content_type: str, value: bytes, decode: bool) -> Any:
    """application/json -> json.loads (bytes if invalid), text/* -> str, else bytes."""
    if not decode:
        return value
    content_type = content_type.split(";", 1)[0].strip().lower()  # multipart parts may keep parameters
    if content_type == "application/json":
        try:
            return json.loads(value.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            logger.warning("Failed json decoding of input data. Forwarding encoded payload")
            return value
        except RecursionError:  # [[[[... past the json module's depth: the handler gets the bytes
            logger.warning("JSON input nested too deeply for Python's decoder (recursion limit %d); "
                           "forwarding encoded payload", JSON_DEPTH_LIMIT)
            return value
    if content_type.startswith("text"):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value


def decode_batch(requests: list[Request], decode: bool | None = None
                 ) -> tuple[list[dict[str, Any]], dict[int, str], list[RequestProcessor]]:
    """Handler input list, {index: request id}, and one RequestProcessor per request."""
    decode = decode_input_enabled() if decode is None else decode
    data: list[dict[str, Any]] = []
    ids: dict[int, str] = {}
    processors: list[RequestProcessor] = []
    for idx, req in enumerate(requests):
        headers: dict[str, Any] = dict(req.headers)
        item: dict[str, Any] = {}
        for part in req.parts:
            item[part.name] = decode_value(part.content_type, part.value, decode)
            headers[part.name] = {"content-type": part.content_type}
        data.append(item)
        ids[idx] = req.request_id
        processors.append(RequestProcessor(headers))
    return data, ids, processors


def encode_value(value: Any) -> bytes:
    """bytes raw, str UTF-8, tensor torch.save, else json.dumps(indent=2) as TorchServe does."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    # A tensor means the handler imported torch: never import it here (seconds, on the first
    # request of a handler that does not use torch).
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        buf = io.BytesIO()
        torch.save(value, buf)
        return buf.getvalue()
    try:
        return json.dumps(value, indent=2).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise BatchError(500, f"cannot encode a handler result of type {type(value).__name__}: "
                         f"{exc}; return bytes, str, a tensor or a JSON-serialisable value") from None


def settle_stream_header(context: Context, idx: int, value: Any) -> None:
    """TorchServe's rule for a continuous-batching step's answer: ``context.stopping_criteria[idx]``
    (when the handler set that list) is asked about ``value`` and True/False sets ``ts_stream_next``
    to false/true (None leaves it as it is); without criteria a ``true`` header becomes ``false``
    (the answer ends the request, as after send_intermediate_predict_response)."""
    criteria = context.stopping_criteria
    if criteria:
        stop = criteria[idx](value)
        if stop is not None:
            context.set_response_header(idx, STREAM_HEADER, "false" if stop else "true")
    elif context.get_response_headers(idx).get(STREAM_HEADER) == "true":
        context.set_response_header(idx, STREAM_HEADER, "false")


def build_responses(results: list[Any], context: Context, final: bool = True,
                    continuous: bool = False) -> list[Response]:
    """One Response per result, with status/headers/content type from the context. ``continuous``:
    a TorchServe-style continuous-batching step, whose ``ts_stream_next`` follows
    :func:`settle_stream_header`; otherwise a final answer always ends its request."""
    out: list[Response] = []
    for idx, value in enumerate(results):
        proc = context.request_processor[idx]
        if continuous:
            settle_stream_header(context, idx, value)
        headers = proc.get_response_headers()
        if final and not continuous and headers.get(STREAM_HEADER) == "true":
            headers[STREAM_HEADER] = "false"
        content_type = ""
        wire_headers: list[tuple[str, str]] = []
        for k, v in headers.items():
            if k.lower() == "content-type":
                content_type = str(v)
            else:
                wire_headers.append((str(k), str(v)))
        status = proc.get_response_status_code()
        phrase = proc.get_response_status_phrase() or ""
        out.append(Response(context.request_ids[idx] if context.request_ids else str(idx),
                            status, phrase, content_type, wire_headers, encode_value(value)))
    return out


def error_responses(requests: list[Request], status: int, message: str) -> list[Response]:
    return [Response(r.request_id, status, message) for r in requests]


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")  # a torch OOM means torch is imported already
    if torch is not None and isinstance(exc, getattr(torch.cuda, "OutOfMemoryError", ())):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def classify_exception(exc: BaseException, model_name: str) -> BatchError:
    """Map a handler exception to the status/message every request of the batch gets."""
    if isinstance(exc, BatchError):
        return exc
    if isinstance(exc, PredictionException):
        logger.warning("model %s: handler raised PredictionException(%s): %s",
                       model_name, exc.error_code, exc.message)
        return BatchError(int(exc.error_code), exc.message)
    if is_oom(exc):
        logger.error("model %s: out of memory in handler: %s", model_name, exc)
        return BatchError(507, f"out of memory: {exc}" if send_error_detail() else "out of memory in the model's handler")
    logger.exception("model %s: handler raised %s", model_name, type(exc).__name__)
    if not send_error_detail():
        return BatchError(500, GENERIC_HANDLER_ERROR)
    return BatchError(500, f"{type(exc).__name__}: {exc}")


# what clients get for a handler exception with send_error_detail=false (the detail is logged)
GENERIC_HANDLER_ERROR = "The model's handler failed on this request; the details are in the server's model log"


def send_error_detail() -> bool:
    """The frontend's `send_error_detail` (TS_SEND_ERROR_DETAIL): handler exception text goes to clients."""
    return os.environ.get("TS_SEND_ERROR_DETAIL", "true").lower() != "false"


def check_results(ret: Any, batch_size: int) -> list[Any]:
    if ret is None:
        raise BatchError(500, f"handler returned None for a batch of {batch_size} requests; "
                         "it must return a list with one result per request")
    if not isinstance(ret, (list, tuple)):
        raise BatchError(500, f"handler returned {type(ret).__name__} for a batch of {batch_size} "
                         "requests; it must return a list with one result per request")
    if len(ret) != batch_size:
        raise BatchError(500, f"handler returned {len(ret)} results for a batch of "
                         f"{batch_size} requests")
    return list(ret)


class Service:
    """A loaded model: its entry point and its context."""

    def __init__(self, model_name: str, entry: Entry, context: Context, handler: Any = None) -> None:
        self.model_name = model_name
        self.entry = entry
        self.context = context
        self.handler = handler  # the handler instance for class handlers, else None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        # One persistent loop: async engines (e.g. vLLM) keep background tasks on it.
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def end_sequence(self, sequence_id: str) -> None:
        """A stateful model's sequence closed (SEQUENCE_END): calls the handler's optional
        ``end_sequence(sequence_id)`` hook — a method of a handler class, or a function beside a
        module's ``handle`` — so it can drop the sequence's state. It may hear of a sequence it
        already forgot (e.g. one it ended itself); a failing hook is logged, not fatal."""
        owner = self.handler if self.handler is not None else inspect.getmodule(self.entry)
        hook = getattr(owner, "end_sequence", None)
        if not callable(hook):
            return
        try:
            hook(sequence_id)
        except Exception:  # noqa: BLE001 - the sequence is closed either way
            logger.exception("model %s: end_sequence(%s) failed", self.model_name, sequence_id)

    def predict(self, requests: list[Request], continuous: bool = False) -> list[Response]:
        """Run the whole batch through the entry point; never raises for handler errors.
        ``continuous``: one step of a TorchServe-style continuous batch (ts/pipeline/step_handler.py)."""
        if not requests:
            return []
        data, ids, processors = decode_batch(requests)
        self.context.set_batch(ids, processors)
        start = time.perf_counter()
        try:
            ret = self.entry(data, self.context)
            # TorchServe's async handlers (async def handle); a list is the common answer, checked first
            if not isinstance(ret, (list, tuple)) and inspect.isawaitable(ret):
                ret = self._event_loop().run_until_complete(ret)
            results = check_results(ret, len(requests))
            ms = round((time.perf_counter() - start) * 1000, 2)
            if self.context.metrics is not None:
                self.context.metrics.add_time(PREDICTION_METRIC, ms)  # as TorchServe's service.py
            responses = build_responses(results, self.context, continuous=continuous)
        except Exception as exc:  # noqa: BLE001 - any handler error fails only this batch
            err = classify_exception(exc, self.model_name)
            return error_responses(requests, err.status, err.message)
        return responses
