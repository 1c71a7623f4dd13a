"""Archive writers: each streams files in with a fixed buffer and commits atomically.

Output goes to a hidden temporary name beside the target and is renamed over it only when
complete, so a failed or interrupted run never leaves a truncated archive behind.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable
from typing import IO, BinaryIO, Protocol

from .artifacts import Entry
from .model_archiver_error import ModelArchiverError
from .progress import Progress

COPY_BUFFER = 1024 * 1024
KERNEL_CHUNK = 8 * 1024 * 1024  # small enough for a progress line per 10 % of 100 MB
GZIP_LEVEL = 6  # tarfile's default of 9 is several times slower for little gain on weights


class ArchiveWriter(Protocol):
    def add_file(self, arcname: str, source: str, progress: Progress) -> None: ...
    def add_bytes(self, arcname: str, data: bytes) -> None: ...
    def commit(self) -> None: ...
    def abort(self) -> None: ...


def copy_stream(src: IO[bytes], dst: IO[bytes], advance: Callable[[int], None]) -> None:
    """Copy with one fixed-size buffer, reporting each chunk."""
    buf = bytearray(COPY_BUFFER)
    view = memoryview(buf)
    while True:
        n = src.readinto(view)  # type: ignore[attr-defined]
        if not n:
            return
        dst.write(view[:n])
        advance(n)


def copy_file(src: BinaryIO, dst: BinaryIO, advance: Callable[[int], None]) -> None:
    """File to file: in the kernel (copy_file_range) when it can, else the buffered loop."""
    if not hasattr(os, "copy_file_range"):  # not Linux
        copy_stream(src, dst, advance)
        return
    size = os.fstat(src.fileno()).st_size
    done = 0
    try:
        while done < size:
            n = os.copy_file_range(src.fileno(), dst.fileno(), min(KERNEL_CHUNK, size - done))
            if n == 0:
                break
            done += n
            advance(n)
    except OSError as e:
        # Older kernels, other filesystems: fall back, carrying on where the kernel stopped.
        if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
            raise
        src.seek(done)
        dst.seek(done)
    copy_stream(src, dst, advance)  # the rest (nothing, unless the file grew or the kernel refused)


def _replace(tmp: str, target: str) -> None:
    """Move a finished output into place, removing what -f allowed us to overwrite."""
    if os.path.isdir(target) and not os.path.islink(target):
        shutil.rmtree(target)
    elif os.path.lexists(target) and os.path.isdir(tmp):
        os.unlink(target)
    os.replace(tmp, target)


def _temp_name(target: str, suffix: str = "") -> str:
    folder, base = os.path.split(target)
    fd, path = tempfile.mkstemp(prefix=f".{base}.", suffix=f".tmp{suffix}", dir=folder or ".")
    os.close(fd)
    return path


class ZipArchiveWriter:
    """``.mar``: a zip, deflated (``default``) or stored (``zip-store``); zip64 when needed."""

    def __init__(self, target: str, compression: int) -> None:
        self.target = target
        self.tmp = _temp_name(target)
        self.compression = compression
        self.zip = zipfile.ZipFile(self.tmp, "w", compression)  # Zip64 is on by default

    def add_file(self, arcname: str, source: str, progress: Progress) -> None:
        info = zipfile.ZipInfo.from_file(source, arcname, strict_timestamps=False)
        info.compress_type = self.compression
        with open(source, "rb") as src, self.zip.open(info, "w") as dst:
            copy_stream(src, dst, progress.advance)

    def add_bytes(self, arcname: str, data: bytes) -> None:
        info = zipfile.ZipInfo(arcname, time.localtime()[:6])
        info.compress_type = self.compression
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, data)

    def commit(self) -> None:
        self.zip.close()
        os.chmod(self.tmp, 0o644)
        _replace(self.tmp, self.target)

    def abort(self) -> None:
        self.zip.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


class _CountingReader(io.RawIOBase):
    """A file wrapper that reports bytes as tarfile pulls them."""

    def __init__(self, f: BinaryIO, advance: Callable[[int], None]) -> None:
        self.f = f
        self.advance = advance

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.advance(len(data))
        return data


class TarArchiveWriter:
    """``tgz``: a gzip tar with every member under ``<model-name>/`` (as TorchServe writes it)."""

    def __init__(self, target: str, prefix: str) -> None:
        self.target = target
        self.prefix = prefix
        self.tmp = _temp_name(target)
        self.tar = tarfile.open(self.tmp, "w:gz", compresslevel=GZIP_LEVEL)

    def add_file(self, arcname: str, source: str, progress: Progress) -> None:
        with open(source, "rb") as src:
            # From the open file, so a symlinked source is stored as the file it points to.
            info = self.tar.gettarinfo(arcname=f"{self.prefix}/{arcname}", fileobj=src)
            info.uname = info.gname = ""
            self.tar.addfile(info, _CountingReader(src, progress.advance))

    def add_bytes(self, arcname: str, data: bytes) -> None:
        info = tarfile.TarInfo(f"{self.prefix}/{arcname}")
        info.size = len(data)
        info.mtime = int(time.time())
        info.mode = 0o644
        self.tar.addfile(info, io.BytesIO(data))

    def commit(self) -> None:
        self.tar.close()
        os.chmod(self.tmp, 0o644)
        _replace(self.tmp, self.target)

    def abort(self) -> None:
        self.tar.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


class DirArchiveWriter:
    """``no-archive``: the archive's layout as a plain folder ``<export-path>/<model-name>/``."""

    def __init__(self, target: str) -> None:
        self.target = target
        folder, base = os.path.split(target)
        self.tmp = tempfile.mkdtemp(prefix=f".{base}.", suffix=".tmp", dir=folder or ".")

    def _dest(self, arcname: str) -> str:
        dest = os.path.join(self.tmp, *arcname.split("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        return dest

    def add_file(self, arcname: str, source: str, progress: Progress) -> None:
        dest = self._dest(arcname)
        with open(source, "rb") as src, open(dest, "wb") as dst:
            copy_file(src, dst, progress.advance)
        shutil.copymode(source, dest)

    def add_bytes(self, arcname: str, data: bytes) -> None:
        with open(self._dest(arcname), "wb") as f:
            f.write(data)

    def commit(self) -> None:
        os.chmod(self.tmp, 0o755)
        _replace(self.tmp, self.target)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


OUTPUT_SUFFIX = {"default": ".mar", "zip-store": ".mar", "tgz": ".tar.gz", "no-archive": ""}


def output_path(export_path: str, model_name: str, archive_format: str) -> str:
    return os.path.join(export_path, model_name + OUTPUT_SUFFIX[archive_format])


def open_writer(target: str, model_name: str, archive_format: str) -> ArchiveWriter:
    if archive_format == "tgz":
        return TarArchiveWriter(target, model_name)
    if archive_format == "no-archive":
        return DirArchiveWriter(target)
    compression = zipfile.ZIP_STORED if archive_format == "zip-store" else zipfile.ZIP_DEFLATED
    return ZipArchiveWriter(target, compression)


def write_archive(target: str, name: str, archive_format: str, entries: list[Entry], manifest: tuple[str, bytes],
                  progress: Progress) -> None:
    """Stream ``entries`` (each with ``arcname``/``source``) and the manifest into ``target``.

    All or nothing: any OSError aborts the temporary output and becomes one ModelArchiverError
    naming the file and the fix, so no half-written archive or stack trace is left behind.
    """
    export_path = os.path.dirname(target) or "."
    try:
        writer = open_writer(target, name, archive_format)
    except OSError as e:
        raise ModelArchiverError(
            f"Cannot write to export-path {export_path}: {e.strerror or e}. "
            "Check the folder's permissions or choose another --export-path."
        ) from e
    source = ""
    try:
        for entry in entries:
            source = entry.source
            writer.add_file(entry.arcname, entry.source, progress)
        source = ""
        writer.add_bytes(*manifest)
        writer.commit()
    except OSError as e:
        writer.abort()
        if source and e.filename == source:
            raise ModelArchiverError(f"Cannot read {source}: {e.strerror}. Check the file and retry.") from e
        raise ModelArchiverError(
            f"Failed to write {target}: {e.strerror or e}. Check disk space and permissions "
            "of the export path and retry; no archive was written."
        ) from e
    except BaseException:
        writer.abort()
        raise
