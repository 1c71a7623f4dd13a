"""Reading frames off a stream: ``read_frame`` and ``FrameReader`` read from any object with
``recv`` and ``recv_into`` (a socket); nothing here opens one. ``ts.protocol.codec`` re-exports all of it.
"""

from __future__ import annotations

from typing import Protocol

from ts.protocol.frames import (
    _HEAD,
    _TYPE_CODES,
    HEADER_SIZE,
    WORKER_MAX_FRAME,
    Frame,
    FrameType,
    UnknownFrameType,
    parse_header,
)


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


def _recv_growing(sock: _Recv, n: int, have: bytes = b"", counted_before: int = 0) -> bytearray:
    """``n`` bytes (the first of them ``have``) in one bytearray that grows with the bytes that
    arrive, never sized from the declared ``n``: a frame header that declares 2 GiB and is
    followed by a few bytes costs a 1 MiB receive buffer, not 2 GiB. Each chunk is copied once
    into the body (growing a large bytearray is a ``realloc``: mremap, no copy), which costs what
    zero-filling a body allocated in full did."""
    buf = bytearray(have)
    chunk = bytearray(min(n - len(buf), _SMALL_FRAME))
    with memoryview(chunk) as view:
        while len(buf) < n:
            k = sock.recv_into(view, min(len(chunk), n - len(buf)))
            if k == 0:
                raise _closed(counted_before + len(buf), counted_before + n, clean_ok=False)
            buf += view[:k]
    return buf


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
    return _recv_growing(sock, n)  # only headers may end cleanly: n is a body here


def _check_header(header: bytes | bytearray, max_length: int) -> tuple[int, FrameType | None, int]:
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
    buffer is read into a bytearray of its own, which grows as its bytes arrive."""

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
            have, self._buf = self._buf[HEADER_SIZE:], b""
            body = _recv_growing(self._sock, length - 5, have, counted_before=HEADER_SIZE)
        if frame_type is None:
            raise UnknownFrameType(header[4], batch_id)
        return Frame(frame_type, batch_id, body)
