"""Bodies of INFERENCE (a batch of requests) and RESULT/CHUNK (its responses) frames.

``decode_batch`` is the worker's hot path: it trusts the lengths and checks the outcome once;
``_decode_batch_checked`` decodes a bad body again to name the field that does not fit.
``ts.protocol.codec`` re-exports all of it.
"""

from __future__ import annotations

import builtins
import struct
from dataclasses import dataclass, field
from typing import Any

from ts.protocol.frames import _U32, _U32_MAX, FrameType, ProtocolError, encode_frame, encode_json_frame


@dataclass
class Part:
    """One input of a request: ``body`` for a raw body, else a multipart/form field name."""

    name: str
    content_type: str
    value: bytes


@dataclass
class Request:
    request_id: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)


@dataclass
class Response:
    request_id: str
    status: int = 200
    message: str = ""
    content_type: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


# ---------------------------------------------------------------------------- primitives


class _Writer:
    """Collects a body's pieces; lengths are packed with their data (one append per field)."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []

    def u32(self, value: int) -> None:
        if not 0 <= value <= _U32_MAX:
            raise ProtocolError(f"value {value} does not fit in u32")
        self._chunks.append(_U32.pack(value))

    def raw(self, data: bytes) -> None:
        # A field over 4 GiB cannot occur: encode_frame refuses any body over the u32 limit.
        self._chunks.append(_U32.pack(len(data) & _U32_MAX))
        self._chunks.append(data)

    def str(self, text: str) -> None:
        data = text.encode("utf-8")
        self._chunks.append(_U32.pack(len(data) & _U32_MAX))
        self._chunks.append(data)

    def getvalue(self) -> bytes:
        return b"".join(self._chunks)


class _Reader:
    """Reads fields off a body. Field names are templates (``request[{}].header name``) formatted
    only when a field is missing, so the success path builds no strings."""

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        # bytes are sliced directly; anything else through a view, so a slice is copied only once
        self._data = data if isinstance(data, bytes) else memoryview(data)
        self._end = len(self._data)
        self._pos = 0
        self._what = what

    def _truncated(self, field_name: str, index: int, need: int, at: int) -> ProtocolError:
        return ProtocolError(
            f"truncated {self._what}: {field_name.format(index)} needs {need} bytes at offset {at}, "
            f"only {self._end - at} left"
        )

    def u32(self, field_name: str, index: int = 0) -> int:
        pos = self._pos
        if pos + 4 > self._end:
            raise self._truncated(field_name, index, 4, pos)
        self._pos = pos + 4
        value: int = _U32.unpack_from(self._data, pos)[0]
        return value

    def raw(self, field_name: str, index: int = 0) -> bytes:
        pos = self._pos
        if pos + 4 > self._end:
            raise self._truncated(field_name + " length", index, 4, pos)
        start = pos + 4
        stop = start + _U32.unpack_from(self._data, pos)[0]
        if stop > self._end:
            raise self._truncated(field_name, index, stop - start, start)
        self._pos = stop
        chunk = self._data[start:stop]
        return chunk if type(chunk) is bytes else bytes(chunk)

    def str(self, field_name: str, index: int = 0) -> str:
        data = self.raw(field_name, index)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{self._what}: {field_name.format(index)} is not valid UTF-8 ({exc})") from None

    def count(self, field_name: builtins.str, min_item_size: int, index: int = 0) -> int:
        n = self.u32(field_name, index)
        # Reject absurd counts before allocating: each item needs at least min_item_size bytes.
        if n * min_item_size > self._end - self._pos:
            raise ProtocolError(f"truncated {self._what}: {field_name.format(index)}={n} exceeds the body size")
        return n

    def finish(self) -> None:
        if self._pos != self._end:
            raise ProtocolError(
                f"{self._what}: {self._end - self._pos} unexpected trailing bytes"
            )


# ---------------------------------------------------------------------------- batches


def encode_batch(requests: list[Request]) -> bytes:
    """INFERENCE body."""
    w = _Writer()
    w.u32(len(requests))
    for req in requests:
        w.str(req.request_id)
        w.u32(len(req.headers))
        for name, value in req.headers:
            w.str(name)
            w.str(value)
        w.u32(len(req.parts))
        for part in req.parts:
            w.str(part.name)
            w.str(part.content_type)
            w.raw(part.value)
    return w.getvalue()


def decode_batch(body: bytes | bytearray) -> list[Request]:
    """INFERENCE body -> requests. The hot path of every batch, so it trusts the lengths and
    checks the outcome once (a field past the end breaks ``unpack_from`` or leaves ``pos`` off
    the end); a bad body is decoded again by ``_decode_batch_checked`` for the exact error."""
    data = body if isinstance(body, bytes) else memoryview(body).tobytes()
    unpack = _U32.unpack_from
    try:
        count = unpack(data, 0)[0]
        if count * 12 > len(data):
            raise struct.error("absurd count")
        pos = 4
        requests = []
        for _ in range(count):
            n = unpack(data, pos)[0]
            pos += 4
            rid = data[pos:pos + n].decode("utf-8")
            pos += n
            headers = []
            k = unpack(data, pos)[0]
            pos += 4
            for _ in range(k):
                n = unpack(data, pos)[0]
                pos += 4
                name = data[pos:pos + n].decode("utf-8")
                pos += n
                n = unpack(data, pos)[0]
                pos += 4
                headers.append((name, data[pos:pos + n].decode("utf-8")))
                pos += n
            parts = []
            k = unpack(data, pos)[0]
            pos += 4
            for _ in range(k):
                n = unpack(data, pos)[0]
                pos += 4
                name = data[pos:pos + n].decode("utf-8")
                pos += n
                n = unpack(data, pos)[0]
                pos += 4
                ctype = data[pos:pos + n].decode("utf-8")
                pos += n
                n = unpack(data, pos)[0]
                pos += 4
                parts.append(Part(name, ctype, data[pos:pos + n]))
                pos += n
            requests.append(Request(rid, headers, parts))
    except (struct.error, UnicodeDecodeError):
        pos = -1
    if pos != len(data):
        _decode_batch_checked(data)  # raises the ProtocolError that names the bad field
        raise ProtocolError("INFERENCE batch does not decode")  # pragma: no cover - checked found nothing
    return requests


def _decode_batch_checked(body: bytes) -> list[Request]:
    """decode_batch, checking every field: the error names the field that does not fit."""
    r = _Reader(body, "INFERENCE batch")
    rstr, rraw, count = r.str, r.raw, r.count
    requests = []
    for i in range(count("request count", 12)):
        rid = rstr("request[{}].request_id", i)
        headers = [(rstr("request[{}].header name", i), rstr("request[{}].header value", i))
                   for _ in range(count("request[{}].header_count", 8, i))]
        parts = [Part(rstr("request[{}].part name", i), rstr("request[{}].part content_type", i),
                      rraw("request[{}].part value", i))
                 for _ in range(count("request[{}].part_count", 12, i))]
        requests.append(Request(rid, headers, parts))
    r.finish()
    return requests


# ---------------------------------------------------------------------------- responses


def encode_responses(responses: list[Response]) -> bytes:
    """RESULT / CHUNK body. Every batch's answer: the fields are packed inline (``_Writer``'s
    layout, without a method call per field)."""
    pack = _U32.pack
    chunks: list[bytes] = [pack(len(responses))]
    add = chunks.append
    for resp in responses:
        if not 0 <= resp.status <= _U32_MAX:
            raise ProtocolError(f"value {resp.status} does not fit in u32")
        data = resp.request_id.encode("utf-8")
        add(pack(len(data)))
        add(data)
        add(pack(resp.status))
        data = resp.message.encode("utf-8")
        add(pack(len(data)))
        add(data)
        data = resp.content_type.encode("utf-8")
        add(pack(len(data)))
        add(data)
        add(pack(len(resp.headers)))
        for name, value in resp.headers:
            data = name.encode("utf-8")
            add(pack(len(data)))
            add(data)
            data = value.encode("utf-8")
            add(pack(len(data)))
            add(data)
        add(pack(len(resp.body) & _U32_MAX))
        add(resp.body)
    return b"".join(chunks)


def decode_responses(body: bytes) -> list[Response]:
    r = _Reader(body, "RESULT/CHUNK responses")
    rstr = r.str
    out = []
    for i in range(r.count("response count", 24)):
        rid = rstr("response[{}].request_id", i)
        status = r.u32("response[{}].status", i)
        message = rstr("response[{}].message", i)
        content_type = rstr("response[{}].content_type", i)
        headers = [(rstr("response[{}].header name", i), rstr("response[{}].header value", i))
                   for _ in range(r.count("response[{}].header_count", 8, i))]
        out.append(Response(rid, status, message, content_type, headers, r.raw("response[{}].body", i)))
    r.finish()
    return out


def encode_inference(batch_id: int, requests: list[Request]) -> bytes:
    return encode_frame(FrameType.INFERENCE, batch_id, encode_batch(requests))


def encode_result(batch_id: int, responses: list[Response], chunk: bool = False) -> bytes:
    ftype = FrameType.CHUNK if chunk else FrameType.RESULT
    return encode_frame(ftype, batch_id, encode_responses(responses))


def encode_answer(batch_id: int, responses: list[Response], records: list[Any]) -> tuple[bytes, ...]:
    """A batch's METRICS frame when there are records to report, then its RESULT: the frontend
    records the metrics before it answers, so a client that reads model_metrics.log (or /metrics)
    once it has its answer finds them there, as with TorchServe."""
    result = encode_result(batch_id, responses)
    if not records:
        return (result,)
    return encode_json_frame(FrameType.METRICS, batch_id, records), result
