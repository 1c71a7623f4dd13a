"""Encoder/decoder for the frontend <-> worker wire protocol (docs/protocol.md, version 1).

Every integer is unsigned big-endian. A frame is ``length:u32 type:u8 batch_id:u32 body`` where
``length`` counts the bytes after itself. This module opens no sockets: ``read_frame`` and
``FrameReader`` read from any object with ``recv`` and ``recv_into`` (a socket).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

HEADER_SIZE = 9  # length:u32 + type:u8 + batch_id:u32
WORKER_MAX_FRAME = 2 * 1024 * 1024 * 1024  # 2 GiB (counted as `length`)
_U32 = struct.Struct(">I")
_HEAD = struct.Struct(">IBI")
_U32_MAX = 0xFFFFFFFF


class FrameType(IntEnum):
    LOAD = 0x01
    INFERENCE = 0x02
    PING = 0x03
    STOP = 0x04
    CANCEL = 0x05
    LOADED = 0x11
    RESULT = 0x12
    CHUNK = 0x13
    PONG = 0x14
    METRICS = 0x15
    ERROR = 0x1F


_TYPE_CODES = frozenset(int(t) for t in FrameType)
JSON_TYPES = frozenset(
    {FrameType.LOAD, FrameType.LOADED, FrameType.PONG, FrameType.METRICS, FrameType.ERROR}
)
EMPTY_TYPES = frozenset({FrameType.PING, FrameType.STOP})
RESPONSE_TYPES = frozenset({FrameType.RESULT, FrameType.CHUNK})
TEXT_TYPES = frozenset({FrameType.CANCEL})  # body: UTF-8 text (the request id)


class ProtocolError(ValueError):
    """A frame that does not follow docs/protocol.md."""


class UnknownFrameType(ProtocolError):
    """A well-framed frame of a type this side does not know (its body was consumed)."""

    def __init__(self, type_code: int, batch_id: int) -> None:
        super().__init__(f"unknown frame type 0x{type_code:02X}")
        self.type_code = type_code
        self.batch_id = batch_id


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


@dataclass
class Frame:
    type: FrameType
    batch_id: int
    body: bytes | bytearray = b""  # bytearray for bodies over 1 MiB (read in place)


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
        return _U32.unpack_from(self._data, pos)[0]

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

    def count(self, field_name: str, min_item_size: int, index: int = 0) -> int:
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


# ---------------------------------------------------------------------------- frames


def encode_frame(frame_type: FrameType | int, batch_id: int, body: bytes = b"") -> bytes:
    """Frame header + body as one bytes object."""
    if not 0 <= batch_id <= _U32_MAX:
        raise ProtocolError(f"batch_id {batch_id} does not fit in u32")
    length = 5 + len(body)
    if length > _U32_MAX:
        raise ProtocolError(f"frame body of {len(body)} bytes is too large for the protocol")
    return _HEAD.pack(length, int(frame_type), batch_id) + body


def parse_header(header: bytes, max_length: int = WORKER_MAX_FRAME) -> tuple[int, FrameType, int]:
    """Return (length, type, batch_id) of a 9-byte header, validating length and type."""
    if len(header) != HEADER_SIZE:
        raise ProtocolError(f"frame header must be {HEADER_SIZE} bytes, got {len(header)}")
    length, type_code, batch_id = _HEAD.unpack(header)
    if length < 5:
        raise ProtocolError(f"frame length {length} is smaller than the 5-byte minimum")
    if length > max_length:
        raise ProtocolError(f"frame of {length} bytes exceeds the limit of {max_length} bytes")
    try:
        frame_type = FrameType(type_code)
    except ValueError:
        raise ProtocolError(f"unknown frame type 0x{type_code:02X}") from None
    return length, frame_type, batch_id


def decode_frame(data: bytes, max_length: int = WORKER_MAX_FRAME) -> Frame:
    """Decode exactly one complete frame (no trailing bytes)."""
    if len(data) < HEADER_SIZE:
        raise ProtocolError(f"frame needs at least {HEADER_SIZE} bytes, got {len(data)}")
    length, frame_type, batch_id = parse_header(data[:HEADER_SIZE], max_length)
    if len(data) != 4 + length:
        raise ProtocolError(f"frame length field says {length} but {len(data) - 4} bytes follow")
    return Frame(frame_type, batch_id, bytes(data[HEADER_SIZE:]))


# ---------------------------------------------------------------------------- json bodies


def encode_json_body(obj: Any) -> bytes:
    """Compact UTF-8 JSON (separators ``,``/``:``, non-ASCII kept as UTF-8)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_json_body(body: bytes, what: str = "json body") -> Any:
    try:
        return json.loads(body.decode("utf-8")) if body else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"{what} is not valid UTF-8 JSON: {exc}") from None


def encode_json_frame(frame_type: FrameType, batch_id: int, obj: Any) -> bytes:
    if frame_type not in JSON_TYPES:
        raise ProtocolError(f"{frame_type.name} does not carry a json body")
    return encode_frame(frame_type, batch_id, encode_json_body(obj))


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
    """RESULT / CHUNK body."""
    w = _Writer()
    w.u32(len(responses))
    for resp in responses:
        w.str(resp.request_id)
        w.u32(resp.status)
        w.str(resp.message)
        w.str(resp.content_type)
        w.u32(len(resp.headers))
        for name, value in resp.headers:
            w.str(name)
            w.str(value)
        w.raw(resp.body)
    return w.getvalue()


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
    """A batch's RESULT, then its METRICS frame when there are records to report."""
    result = encode_result(batch_id, responses)
    if not records:
        return (result,)
    return result, encode_json_frame(FrameType.METRICS, batch_id, records)


# ---------------------------------------------------------------------------- streams


class _Recv(Protocol):
    def recv(self, bufsize: int) -> bytes: ...

    def recv_into(self, buffer: memoryview, nbytes: int = ...) -> int: ...


class ConnectionClosed(EOFError):
    """The peer closed the socket (cleanly if between frames)."""

    def __init__(self, message: str, clean: bool) -> None:
        super().__init__(message)
        self.clean = clean


_SMALL_FRAME = 1 << 20  # bodies up to this size are read with recv(): no buffer to copy out of


def _closed(got: int, n: int, clean_ok: bool) -> ConnectionClosed:
    clean = clean_ok and got == 0
    return ConnectionClosed(
        "connection closed" if clean else f"connection closed mid-frame ({got}/{n} bytes)", clean)


def _recv_exact(sock: _Recv, n: int, clean_ok: bool) -> bytes | bytearray:
    if n <= _SMALL_FRAME:
        data = sock.recv(n)
        if len(data) == n:  # the usual case: one syscall, no copy
            return data
        chunks = [data]
        got = len(data)
        while got < n:
            if not data:
                raise _closed(got, n, clean_ok)
            data = sock.recv(n - got)
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)
    buf = bytearray(n)  # large bodies: one allocation, filled in place
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise _closed(got, n, clean_ok)
        got += k
    return buf


def _check_header(header: bytes, max_length: int) -> tuple[int, FrameType | None, int]:
    """(length, type, batch_id); type None for a well-framed frame of an unknown type."""
    length, type_code, batch_id = _HEAD.unpack(header)
    if 5 <= length <= max_length and type_code not in _TYPE_CODES:
        return length, None, batch_id
    return parse_header(header, max_length)


def read_frame(sock: _Recv, max_length: int = WORKER_MAX_FRAME) -> Frame:
    """Block until one whole frame arrived, reading exactly its bytes (nothing of the next
    frame); ConnectionClosed on EOF, ProtocolError on garbage.

    A frame of unknown type is consumed whole and reported as UnknownFrameType, so the
    reader stays in sync and may carry on.
    """
    header = _recv_exact(sock, HEADER_SIZE, clean_ok=True)
    length, frame_type, batch_id = _check_header(header, max_length)
    body = _recv_exact(sock, length - 5, clean_ok=False) if length > 5 else b""
    if frame_type is None:
        raise UnknownFrameType(header[4], batch_id)
    return Frame(frame_type, batch_id, body)


class FrameReader:
    """``read_frame`` for a connection this reader owns: through one receive buffer, so a small
    frame costs one ``recv`` (header and body together) instead of two. A body larger than the
    buffer is read straight into a bytearray of its own."""

    BUFSIZE = 64 * 1024  # below malloc's mmap threshold: a recv buffer is a cheap allocation

    def __init__(self, sock: _Recv, max_length: int = WORKER_MAX_FRAME) -> None:
        self._sock = sock
        self._max_length = max_length
        self._buf = b""

    def buffered(self) -> bool:
        """Bytes of a next frame are already here (a select() on the socket would not say so)."""
        return bool(self._buf)

    def _fill(self, n: int, clean_ok: bool) -> None:
        while len(self._buf) < n:
            data = self._sock.recv(max(self.BUFSIZE, n - len(self._buf)))
            if not data:
                got, self._buf = len(self._buf), b""  # the stream ended: nothing more to frame
                raise _closed(got, n, clean_ok)
            self._buf = self._buf + data if self._buf else data

    def read(self) -> Frame:
        self._fill(HEADER_SIZE, clean_ok=True)
        header = self._buf[:HEADER_SIZE]
        length, frame_type, batch_id = _check_header(header, self._max_length)
        end = 4 + length
        if end <= self.BUFSIZE or len(self._buf) >= end:
            self._fill(end, clean_ok=False)
            body: bytes | bytearray = self._buf[HEADER_SIZE:end]
            self._buf = self._buf[end:]
        else:
            body = bytearray(length - 5)
            have = self._buf[HEADER_SIZE:]
            body[:len(have)] = have
            self._buf = b""
            view = memoryview(body)
            got = len(have)
            while got < len(body):
                k = self._sock.recv_into(view[got:], len(body) - got)
                if k == 0:
                    raise _closed(HEADER_SIZE + got, end, clean_ok=False)
                got += k
        if frame_type is None:
            raise UnknownFrameType(header[4], batch_id)
        return Frame(frame_type, batch_id, body)
