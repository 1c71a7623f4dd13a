"""Micro-benchmark of the worker's codec over the shared protocol vectors (test/protocol_vectors).

    python benchmarks/codec_micro.py [--repeat 7]

For each operation: the best of ``--repeat`` timeit runs, in microseconds of this process's CPU
time per call (``time.process_time``: time spent descheduled on a busy machine is not counted). Decoding
parses every vector's frame and its body (batch, responses or JSON); encoding rebuilds each
frame from the decoded meaning; ``FrameReader`` reads all vectors back from one buffered stream.
"""

from __future__ import annotations

import argparse
import time
import timeit
from pathlib import Path

from ts.protocol import codec
from ts.protocol.codec import FrameType

VECTORS = Path(__file__).resolve().parents[1] / "test" / "protocol_vectors"


class _Replay:
    """A socket stand-in that returns the same bytes on every pass."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def rewind(self) -> None:
        self._pos = 0

    def recv(self, n: int) -> bytes:
        out = self._data[self._pos:self._pos + n]
        self._pos += len(out)
        return out

    def recv_into(self, view: memoryview, n: int = 0) -> int:
        out = self.recv(n or len(view))
        view[:len(out)] = out
        return len(out)


def _decode(frame: codec.Frame):
    if frame.type is FrameType.INFERENCE:
        return codec.decode_batch(frame.body)
    if frame.type in codec.RESPONSE_TYPES:
        return codec.decode_responses(frame.body)
    if frame.type in codec.JSON_TYPES:
        return codec.decode_json_body(frame.body)
    return None


def _encode(frame: codec.Frame, meaning) -> bytes:
    if frame.type is FrameType.INFERENCE:
        return codec.encode_inference(frame.batch_id, meaning)
    if frame.type in codec.RESPONSE_TYPES:
        return codec.encode_result(frame.batch_id, meaning, chunk=frame.type is FrameType.CHUNK)
    if frame.type in codec.JSON_TYPES:
        return codec.encode_json_frame(frame.type, frame.batch_id, meaning)
    return codec.encode_frame(frame.type, frame.batch_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    raws = [p.read_bytes() for p in sorted(VECTORS.glob("*.bin"))]
    frames = [codec.decode_frame(r) for r in raws]
    meanings = [_decode(f) for f in frames]
    for f, m, r in zip(frames, meanings, raws, strict=True):
        assert _encode(f, m) == r or f.type in codec.JSON_TYPES, f.type
    batches = [f for f in frames if f.type is FrameType.INFERENCE]
    batch_meanings = [codec.decode_batch(f.body) for f in batches]
    results = [(f, m) for f, m in zip(frames, meanings, strict=True) if f.type in codec.RESPONSE_TYPES]
    stream = _Replay(b"".join(raws))

    def read_all() -> None:
        stream.rewind()
        reader = codec.FrameReader(stream)
        for _ in raws:
            reader.read()

    cases = {
        f"decode all {len(raws)} vectors (frame + body)": lambda: [_decode(codec.decode_frame(r)) for r in raws],
        f"encode all {len(raws)} vectors": lambda: [_encode(f, m) for f, m in zip(frames, meanings, strict=True)],
        f"decode_batch x{len(batches)} (INFERENCE bodies)": lambda: [codec.decode_batch(f.body) for f in batches],
        f"encode_inference x{len(batches)}": lambda: [codec.encode_inference(f.batch_id, m)
                                                       for f, m in zip(batches, batch_meanings, strict=True)],
        f"decode_responses x{len(results)} (RESULT/CHUNK bodies)": lambda: [codec.decode_responses(f.body) for f, _ in results],
        f"encode_result x{len(results)}": lambda: [codec.encode_result(f.batch_id, m) for f, m in results],
        f"FrameReader.read x{len(raws)} (one buffered stream)": read_all,
    }
    print(f"codec: {Path(codec.__file__).resolve()}")
    for name, fn in cases.items():
        timer = timeit.Timer(fn, timer=time.process_time)
        number, _ = timer.autorange()
        best = min(timer.repeat(repeat=args.repeat, number=number)) / number
        print(f"{best * 1e6:9.2f} us  {name}")


if __name__ == "__main__":
    main()
