"""Coverage-guided fuzzing of the worker's protocol decoders with atheris (libFuzzer).

    python test/fuzz/fuzz_protocol.py -runs=20000 -seed=1            # what `make test` runs
    python test/fuzz/fuzz_protocol.py -max_total_time=600            # a longer run, on demand

Run from the repository root with ``PYTHONPATH=$PWD``. Any libFuzzer flag may be added
(``-artifact_prefix=DIR/`` says where a crashing input is written; the default is the working
directory). The shared protocol vectors (test/protocol_vectors/*.bin) are the seeds, passed with
``-seed_inputs`` so that no corpus folder is written.

Every input goes through every decoder of ``ts.protocol``: a whole frame (``decode_frame`` then the
body by its type), the bodies on their own (INFERENCE batch, both decoders, which must agree;
RESULT/CHUNK responses; JSON), and a stream of frames read by ``read_frame`` and ``FrameReader``.
What must hold, else the input is reported as a crash:

* the only exceptions are ``ProtocolError`` (``UnknownFrameType`` included) and, on a stream,
  ``ConnectionClosed``;
* no buffer is sized from a length field beyond the bytes present: a socket stand-in fails the
  input when it is handed a receive buffer larger than twice the stream plus 1 MiB;
* no input runs longer than libFuzzer's ``-timeout`` (the test passes 10 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from ts.protocol import codec
    from ts.protocol.codec import ConnectionClosed, FrameType, ProtocolError, UnknownFrameType

VECTORS = Path(__file__).resolve().parents[1] / "protocol_vectors"
_RECV_SLACK = 1 << 20  # the readers' first step for a large body (ts.protocol.stream._SMALL_FRAME)


class BoundedStream:
    """A socket stand-in over ``data`` that hands out ``step`` bytes per call at most and fails
    the input when a reader asks for a buffer sized beyond what the stream holds."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = data
        self._pos = 0
        self._step = step
        self._bound = 2 * len(data) + _RECV_SLACK

    def _check(self, size: int) -> None:
        if size > self._bound:
            raise AssertionError(f"a reader sized a {size}-byte buffer for a {len(self._data)}-byte stream")

    def recv(self, bufsize: int) -> bytes:
        self._check(bufsize)  # a real socket allocates bufsize bytes before it receives
        n = min(bufsize, self._step)
        out = self._data[self._pos:self._pos + n]
        self._pos += len(out)
        return out

    def recv_into(self, buffer: memoryview, nbytes: int = 0) -> int:
        self._check(len(buffer.obj) if isinstance(buffer.obj, bytearray) else len(buffer))
        out = self.recv(nbytes or len(buffer))
        buffer[:len(out)] = out
        return len(out)


def _decode_body(frame_type: FrameType, body: bytes) -> None:
    if frame_type is FrameType.INFERENCE:
        codec.decode_batch(body)
    elif frame_type in codec.RESPONSE_TYPES:
        codec.decode_responses(bytes(body))
    elif frame_type in codec.JSON_TYPES:
        codec.decode_json_body(bytes(body))


def _frame(data: bytes) -> None:
    try:
        frame = codec.decode_frame(data)
        _decode_body(frame.type, frame.body)
    except ProtocolError:
        pass


def _bodies(data: bytes) -> None:
    try:
        checked = codec._decode_batch_checked(data)
    except ProtocolError as exc:
        try:
            codec.decode_batch(data)
        except ProtocolError as fast:
            if str(fast) != str(exc):
                raise AssertionError(f"decoders disagree: {fast} / {exc}") from None
        else:
            raise AssertionError("decode_batch accepted a body the checked decoder refused") from None
    else:
        if codec.decode_batch(data) != checked:
            raise AssertionError("decode_batch and the checked decoder decoded different requests")
    for decode in (codec.decode_responses, codec.decode_json_body):
        try:
            decode(data)
        except ProtocolError:
            pass


def _stream(data: bytes, step: int) -> None:
    for read in (lambda s: (lambda: codec.read_frame(s)), lambda s: codec.FrameReader(s).read):
        next_frame = read(BoundedStream(data, step))
        for _ in range(len(data) // codec.HEADER_SIZE + 1):  # each frame takes 9 bytes at least
            try:
                frame = next_frame()
                _decode_body(frame.type, frame.body)
            except UnknownFrameType:
                continue  # consumed whole: the reader is still in sync
            except (ProtocolError, ConnectionClosed):
                break
        else:
            raise AssertionError("the reader returned more frames than the stream can hold")


def one_input(data: bytes) -> None:
    _frame(data)
    _bodies(data)
    _stream(data, step=1 + (data[-1] if data else 0) * 7)  # receive sizes vary with the input


def main(argv: list[str]) -> None:
    seeds = ",".join(str(p) for p in sorted(VECTORS.glob("*.bin")))
    atheris.Setup([*argv, f"-seed_inputs={seeds}"], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
