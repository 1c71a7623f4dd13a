"""Frames of the frontend <-> worker wire protocol (docs/protocol.md, version 1): the header,
the frame types, whole frames as bytes, and JSON bodies.

Every integer is unsigned big-endian. A frame is ``length:u32 type:u8 batch_id:u32 body`` where
``length`` counts the bytes after itself. ``ts.protocol.codec`` re-exports all of it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

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
    SEQUENCE_END = 0x06
    LOADED = 0x11
    RESULT = 0x12
    CHUNK = 0x13
    PONG = 0x14
    METRICS = 0x15
    ERROR = 0x1F


_BY_CODE = {int(t): t for t in FrameType}  # a frame header's type code -> FrameType
_TYPE_CODES = frozenset(_BY_CODE)
JSON_TYPES = frozenset(
    {FrameType.LOAD, FrameType.LOADED, FrameType.PONG, FrameType.METRICS, FrameType.ERROR}
)
EMPTY_TYPES = frozenset({FrameType.PING, FrameType.STOP})
RESPONSE_TYPES = frozenset({FrameType.RESULT, FrameType.CHUNK})
# body: UTF-8 text (CANCEL: the request id; SEQUENCE_END: the sequence id)
TEXT_TYPES = frozenset({FrameType.CANCEL, FrameType.SEQUENCE_END})


class ProtocolError(ValueError):
    """A frame that does not follow docs/protocol.md."""


class UnknownFrameType(ProtocolError):
    """A well-framed frame of a type this side does not know (its body was consumed)."""

    def __init__(self, type_code: int, batch_id: int) -> None:
        super().__init__(f"unknown frame type 0x{type_code:02X}")
        self.type_code = type_code
        self.batch_id = batch_id


@dataclass
class Frame:
    type: FrameType
    batch_id: int
    body: bytes | bytearray = b""  # bytearray for bodies over 1 MiB (read in place)


def encode_frame(frame_type: FrameType | int, batch_id: int, body: bytes = b"") -> bytes:
    """Frame header + body as one bytes object."""
    if not 0 <= batch_id <= _U32_MAX:
        raise ProtocolError(f"batch_id {batch_id} does not fit in u32")
    length = 5 + len(body)
    if length > _U32_MAX:
        raise ProtocolError(f"frame body of {len(body)} bytes is too large for the protocol")
    return _HEAD.pack(length, int(frame_type), batch_id) + body


def parse_header(header: bytes | bytearray, max_length: int = WORKER_MAX_FRAME) -> tuple[int, FrameType, int]:
    """Return (length, type, batch_id) of a 9-byte header, validating length and type."""
    if len(header) != HEADER_SIZE:
        raise ProtocolError(f"frame header must be {HEADER_SIZE} bytes, got {len(header)}")
    length, type_code, batch_id = _HEAD.unpack(header)
    if length < 5:
        raise ProtocolError(f"frame length {length} is smaller than the 5-byte minimum")
    if length > max_length:
        raise ProtocolError(f"frame of {length} bytes exceeds the limit of {max_length} bytes")
    frame_type = _BY_CODE.get(type_code)  # a dict, not FrameType(code): this runs for every frame
    if frame_type is None:
        raise ProtocolError(f"unknown frame type 0x{type_code:02X}")
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


# json.dumps with options builds a new encoder per call; a METRICS frame goes with every sampled batch
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def encode_json_body(obj: Any) -> bytes:
    """Compact UTF-8 JSON (separators ``,``/``:``, non-ASCII kept as UTF-8)."""
    return _JSON.encode(obj).encode("utf-8")


def decode_json_body(body: bytes | bytearray, what: str = "json body") -> Any:
    try:
        return json.loads(body.decode("utf-8")) if body else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"{what} is not valid UTF-8 JSON: {exc}") from None
    except RecursionError:  # json's recursive parser on a body like [[[[...: not a crash of the reader
        raise ProtocolError(f"{what} is JSON nested too deeply to decode") from None


def encode_json_frame(frame_type: FrameType, batch_id: int, obj: Any) -> bytes:
    if frame_type not in JSON_TYPES:
        raise ProtocolError(f"{frame_type.name} does not carry a json body")
    return encode_frame(frame_type, batch_id, encode_json_body(obj))
