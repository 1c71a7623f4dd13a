"""Encoder/decoder for the frontend <-> worker wire protocol (docs/protocol.md, version 1).

The codec lives in three modules, one per job; this one re-exports them, so
``from ts.protocol.codec import ...`` and ``codec.X`` keep working:

* ``ts.protocol.frames``: the 9-byte header, ``FrameType``, whole frames as bytes, JSON bodies;
* ``ts.protocol.messages``: INFERENCE batches and RESULT/CHUNK responses (the fast ``decode_batch``);
* ``ts.protocol.stream``: ``read_frame`` and ``FrameReader``, which read frames off a socket.

The names are the same objects (no wrappers), so going through this module costs nothing.
"""

from __future__ import annotations

from ts.protocol.frames import (
    EMPTY_TYPES,
    HEADER_SIZE,
    JSON_TYPES,
    RESPONSE_TYPES,
    TEXT_TYPES,
    WORKER_MAX_FRAME,
    Frame,
    FrameType,
    ProtocolError,
    UnknownFrameType,
    decode_frame,
    decode_json_body,
    encode_frame,
    encode_json_body,
    encode_json_frame,
    parse_header,
)
from ts.protocol.messages import (
    Part,
    Request,
    Response,
    _decode_batch_checked,
    decode_batch,
    decode_responses,
    encode_answer,
    encode_batch,
    encode_inference,
    encode_responses,
    encode_result,
)
from ts.protocol.stream import ConnectionClosed, FrameReader, read_frame

__all__ = [
    "EMPTY_TYPES", "HEADER_SIZE", "JSON_TYPES", "RESPONSE_TYPES", "TEXT_TYPES", "WORKER_MAX_FRAME",
    "ConnectionClosed", "Frame", "FrameReader", "FrameType", "Part", "ProtocolError", "Request", "Response",
    "UnknownFrameType", "_decode_batch_checked", "decode_batch", "decode_frame", "decode_json_body",
    "decode_responses", "encode_answer", "encode_batch", "encode_frame", "encode_inference",
    "encode_json_body", "encode_json_frame", "encode_responses", "encode_result", "parse_header", "read_frame",
]
