"""Protocol codec: round trips, byte-exact vectors, and malformed input."""

from __future__ import annotations

import base64
import importlib.util
import json
import socket
import threading
from pathlib import Path

import pytest

from ts.protocol import codec
from ts.protocol.codec import FrameType, Part, ProtocolError, Request, Response

VECTORS = Path(__file__).resolve().parents[1] / "protocol_vectors"
NAMES = sorted(p.stem for p in VECTORS.glob("*.bin"))


def _meaning_to_body(doc: dict) -> bytes:
    ftype = FrameType[doc["type"]]
    if ftype in codec.JSON_TYPES:
        return codec.encode_json_body(doc["json"])
    if ftype in codec.EMPTY_TYPES:
        return base64.b64decode(doc["body_b64"])
    if ftype in codec.TEXT_TYPES:
        return doc["text"].encode("utf-8")
    if ftype is FrameType.INFERENCE:
        reqs = [
            Request(r["request_id"], [tuple(h) for h in r["headers"]],
                    [Part(p["name"], p["content_type"], base64.b64decode(p["value_b64"]))
                     for p in r["parts"]])
            for r in doc["requests"]
        ]
        return codec.encode_batch(reqs)
    resps = [
        Response(r["request_id"], r["status"], r["message"], r["content_type"],
                 [tuple(h) for h in r["headers"]], base64.b64decode(r["body_b64"]))
        for r in doc["responses"]
    ]
    return codec.encode_responses(resps)


def test_vectors_cover_every_frame_type() -> None:
    types = {json.loads((VECTORS / f"{n}.json").read_text())["type"] for n in NAMES}
    assert types == {t.name for t in FrameType}


@pytest.mark.parametrize("name", NAMES)
def test_vector_decodes_to_its_json_and_reencodes_identically(name: str) -> None:
    raw = (VECTORS / f"{name}.bin").read_bytes()
    doc = json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))
    frame = codec.decode_frame(raw)
    assert frame.type.name == doc["type"]
    assert int(frame.type) == doc["type_code"]
    assert frame.batch_id == doc["batch_id"]
    assert len(raw) - 4 == doc["length"]
    if frame.type in codec.JSON_TYPES:
        assert codec.decode_json_body(frame.body) == doc["json"]
    elif frame.type in codec.EMPTY_TYPES:
        assert frame.body == b""
    elif frame.type in codec.TEXT_TYPES:
        assert bytes(frame.body).decode("utf-8") == doc["text"]
    elif frame.type is FrameType.INFERENCE:
        reqs = codec.decode_batch(frame.body)
        assert [r.request_id for r in reqs] == [r["request_id"] for r in doc["requests"]]
        for got, want in zip(reqs, doc["requests"], strict=True):
            assert [list(h) for h in got.headers] == want["headers"]
            assert [(p.name, p.content_type, base64.b64encode(p.value).decode())
                    for p in got.parts] == [
                (p["name"], p["content_type"], p["value_b64"]) for p in want["parts"]]
    else:
        resps = codec.decode_responses(frame.body)
        assert [
            {"request_id": r.request_id, "status": r.status, "message": r.message,
             "content_type": r.content_type, "headers": [list(h) for h in r.headers],
             "body_b64": base64.b64encode(r.body).decode()} for r in resps
        ] == doc["responses"]
    assert codec.encode_frame(frame.type, frame.batch_id, _meaning_to_body(doc)) == raw


def test_generator_is_reproducible() -> None:
    spec = importlib.util.spec_from_file_location("gen", VECTORS / "generate.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for name, (_desc, frame, _meaning) in gen.vectors().items():
        assert (VECTORS / f"{name}.bin").read_bytes() == frame, name


def test_round_trip_batch_and_responses() -> None:
    reqs = [Request("r" * 300, [("k", "v" * 70000)], [Part("f", "x/y", b"\x00" * 100000)]),
            Request("é", [], [])]
    assert codec.decode_batch(codec.encode_batch(reqs)) == reqs
    resps = [Response("é", 599, "m", "t", [("a", "b"), ("a", "c")], b"\xff"), Response("z")]
    assert codec.decode_responses(codec.encode_responses(resps)) == resps


def test_frame_header_layout() -> None:
    raw = codec.encode_frame(FrameType.RESULT, 0xDEADBEEF, b"xyz")
    assert raw == b"\x00\x00\x00\x08\x12\xde\xad\xbe\xefxyz"


@pytest.mark.parametrize("raw, message", [
    (b"\x00\x00\x00\x05\x7f\x00\x00\x00\x01", "unknown frame type 0x7F"),
    (b"\x00\x00\x00\x04\x03\x00\x00\x00\x01", "smaller than the 5-byte minimum"),
    (b"\x00\x00\x00\x09\x03\x00\x00\x00\x01", "length field says 9"),
])
def test_bad_frames_are_rejected_with_a_reason(raw: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        codec.decode_frame(raw)


def test_oversized_frame_rejected_before_reading_body() -> None:
    header = b"\x7f\xff\xff\xff\x02\x00\x00\x00\x01"
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        codec.parse_header(header, max_length=1024)


def test_truncated_and_trailing_bodies() -> None:
    body = codec.encode_batch([Request("a", [("h", "v")], [])])
    with pytest.raises(ProtocolError, match="truncated"):
        codec.decode_batch(body[:-1])
    with pytest.raises(ProtocolError, match="trailing"):
        codec.decode_batch(body + b"\x00")
    with pytest.raises(ProtocolError, match="exceeds the body size"):
        codec.decode_batch(b"\xff\xff\xff\xff")
    bad_utf8 = b"\x00\x00\x00\x01" b"\x00\x00\x00\x01\xff" + b"\x00" * 8
    with pytest.raises(ProtocolError, match="not valid UTF-8"):
        codec.decode_batch(bad_utf8)


def test_u32_overflow_is_refused() -> None:
    with pytest.raises(ProtocolError, match="does not fit in u32"):
        codec.encode_responses([Response("a", status=2**32)])


READERS = {"read_frame": lambda sock: (lambda: codec.read_frame(sock)),
           "FrameReader": lambda sock: codec.FrameReader(sock).read}


@pytest.mark.parametrize("reader", READERS)
def test_read_frame_from_socket_pair(reader: str) -> None:
    a, b = socket.socketpair()
    read = READERS[reader](b)
    try:
        frames = [codec.encode_frame(FrameType.PING, 3),
                  codec.encode_frame(0x7E, 8, b"future"),
                  codec.encode_inference(4, [Request("x", [], [Part("body", "", b"1" * 5000)])])]
        a.sendall(b"".join(frames))
        first = read()
        with pytest.raises(codec.UnknownFrameType) as unknown:
            read()
        assert (unknown.value.type_code, unknown.value.batch_id) == (0x7E, 8)
        second = read()  # still in sync after the unknown frame
        assert (first.type, first.batch_id) == (FrameType.PING, 3)
        assert codec.decode_batch(second.body)[0].parts[0].value == b"1" * 5000
        a.sendall(frames[2][:10])
        a.close()
        with pytest.raises(codec.ConnectionClosed) as exc:
            read()
        assert not exc.value.clean
        with pytest.raises(codec.ConnectionClosed) as exc:
            read()
        assert exc.value.clean
    finally:
        b.close()


def test_frame_reader_with_frames_split_at_every_byte() -> None:
    """However the stream is cut, FrameReader returns the same frames in order."""
    frames = [codec.encode_inference(i, [Request(f"r{i}", [("h", "v")], [Part("body", "", b"z" * i)])])
              for i in range(1, 6)]
    stream = b"".join(frames)
    for cut in range(1, len(stream)):
        a, b = socket.socketpair()
        try:
            a.sendall(stream[:cut])
            sender = threading.Thread(target=a.sendall, args=(stream[cut:],))
            sender.start()
            reader = codec.FrameReader(b)
            got = [reader.read() for _ in frames]
            sender.join()
            assert [codec.encode_frame(f.type, f.batch_id, f.body) for f in got] == frames
            assert not reader.buffered()
        finally:
            a.close()
            b.close()


def test_fast_and_checked_batch_decoders_agree_on_every_truncation_and_corruption() -> None:
    """decode_batch trusts lengths on its fast path; any body it cannot decode must raise the
    checked decoder's ProtocolError, and any body it does decode must decode the same both ways."""
    import random

    rng = random.Random(7)
    body = codec.encode_batch([Request("rid-1", [("h", "v"), ("é", "ü")], [Part("body", "x/y", b"\x00\x01")]),
                               Request("rid-2", [], [Part("a", "", b""), Part("b", "t", b"z" * 40)])])
    mutations = [body[:n] for n in range(len(body))] + [body + b"\x00"]
    for _ in range(400):
        raw = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        mutations.append(bytes(raw))
    for raw in mutations:
        try:
            checked = codec._decode_batch_checked(raw)
        except ProtocolError as exc:
            with pytest.raises(ProtocolError) as fast:
                codec.decode_batch(raw)
            assert str(fast.value) == str(exc)
        else:
            assert codec.decode_batch(raw) == checked


@pytest.mark.parametrize("reader", READERS)
def test_read_frame_of_a_large_body_over_several_recvs(reader: str) -> None:
    """Large bodies are read in place into one buffer, however the kernel splits them."""
    a, b = socket.socketpair()
    try:
        value = bytes(range(256)) * 8192  # 2 MiB
        frame = codec.encode_inference(9, [Request("big", [], [Part("body", "", value)])])
        sender = threading.Thread(target=a.sendall, args=(frame + codec.encode_frame(FrameType.PING, 1),))
        sender.start()
        read = READERS[reader](b)
        got = read()
        assert read().type is FrameType.PING
        sender.join()
        assert got.batch_id == 9 and codec.decode_batch(got.body)[0].parts[0].value == value
    finally:
        a.close()
        b.close()


class _LargestBuffer:
    """A socket that remembers the largest receive buffer a reader handed it."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.largest = 0

    def recv(self, bufsize: int) -> bytes:
        self.largest = max(self.largest, bufsize)
        return self._sock.recv(bufsize)

    def recv_into(self, buffer: memoryview, nbytes: int = 0) -> int:
        self.largest = max(self.largest, len(buffer.obj))
        return self._sock.recv_into(buffer, nbytes)


@pytest.mark.parametrize("reader", READERS)
def test_a_declared_length_is_not_allocated_before_its_bytes_arrive(reader: str) -> None:
    """A header declaring 256 MiB followed by 100 bytes and EOF: the reader's buffer follows the
    bytes that came (it grows as they arrive), not the length field (found by test/fuzz)."""
    a, b = socket.socketpair()
    try:
        sock = _LargestBuffer(b)
        a.sendall(b"\x10\x00\x00\x05\x02\x00\x00\x00\x01" + b"x" * 100)
        a.close()
        with pytest.raises(codec.ConnectionClosed, match="mid-frame") as exc:
            READERS[reader](sock)()
        assert not exc.value.clean
        assert sock.largest <= 1 << 20
    finally:
        b.close()


def test_deeply_nested_json_body_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="nested too deeply"):
        codec.decode_json_body(b"[" * 200_000)
