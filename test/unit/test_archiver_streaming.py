"""Big checkpoints are streamed (small, flat memory) and show progress on stderr.

Each case runs the real CLI in a child process and reads that child's own peak RSS from
``os.wait4``; the inputs are sparse files made with ``truncate``, so they cost no disk.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

import model_archiver

ARCHIVER_ROOT = Path(model_archiver.__file__).resolve().parents[1]
GB = 1024**3
MB = 1_000_000
# Interpreter + archiver is ~20 MB; reading a whole input into memory would add its size.
RSS_LIMIT_KB = 100 * 1024
PROGRESS = re.compile(r"^torch-model-archiver: net: (\d+)% \((\d+)/(\d+) MB\)$")


def sparse(path: Path, size: int) -> Path:
    subprocess.run(["truncate", "-s", str(size), str(path)], check=True)
    return path


def archive_in_child(tmp_path: Path, weights: Path, fmt: str) -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in KiB) of one torch-model-archiver run."""
    (tmp_path / "handler.py").write_text("def handle(data, context):\n    return data\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ARCHIVER_ROOT), os.environ.get("PYTHONPATH", "")]))
    # ru_maxrss from wait4 would include the forked image of this (possibly large) test process;
    # VmHWM read inside the child after exec measures the archiver alone.
    hwm_path = tmp_path / "vmhwm.txt"
    wrapper = (
        "import runpy, sys\n"
        "sys.argv[0] = 'torch-model-archiver'\n"
        "try:\n"
        "    runpy.run_module('model_archiver', run_name='__main__')\n"
        "finally:\n"
        "    hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
        f"    open({str(hwm_path)!r}, 'w').write(hwm.split()[1])\n"
    )
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.run(
            [sys.executable, "-c", wrapper, "--model-name", "net", "--version", "1",
             "--handler", "handler.py", "--serialized-file", str(weights), "--archive-format", fmt,
             "--export-path", "out"],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err,
        )
    return proc.returncode, err_path.read_text(), int(hwm_path.read_text())


def check_progress(stderr: str, total: int) -> None:
    lines = [line for line in stderr.splitlines() if line.startswith("torch-model-archiver: net:")]
    parsed = [PROGRESS.match(line) for line in lines]
    assert all(parsed), lines
    pcts = [int(m.group(1)) for m in parsed]  # type: ignore[union-attr]
    assert pcts == list(range(10, 101, 10)), lines
    assert {int(m.group(3)) for m in parsed} == {total // MB}  # type: ignore[union-attr]
    done = [int(m.group(2)) for m in parsed]  # type: ignore[union-attr]
    assert done == sorted(done) and done[-1] == total // MB


@pytest.mark.slow  # writes a multi-GB checkpoint: left out of make test-quick
def test_multi_gb_checkpoint_streams_with_progress(tmp_path: Path) -> None:
    # zip-store: the format for big weights; past 2 GiB it also needs zip64.
    size = 2 * GB + 12345
    weights = sparse(tmp_path / "weights.pt", size)
    try:
        code, stderr, rss_kb = archive_in_child(tmp_path, weights, "zip-store")
        assert code == 0, stderr
        with zipfile.ZipFile(tmp_path / "out" / "net.mar") as z:
            info = z.getinfo("weights.pt")
            assert (info.file_size, info.compress_type) == (size, zipfile.ZIP_STORED)
            assert info.extra[:2] == b"\x01\x00"  # the zip64 extra field
        check_progress(stderr, size)
        assert rss_kb < RSS_LIMIT_KB, f"peak RSS {rss_kb} KiB for a {size} byte input"
    finally:
        shutil.rmtree(tmp_path / "out", ignore_errors=True)  # do not leave GBs in pytest's tmp dirs


@pytest.mark.slow   # a 320 MB input archived in a child process, in each format
@pytest.mark.parametrize("fmt", ["default", "tgz", "no-archive"])
def test_other_formats_stream(tmp_path: Path, fmt: str) -> None:
    size = 320 * 1024 * 1024
    weights = sparse(tmp_path / "weights.pt", size)
    code, stderr, rss_kb = archive_in_child(tmp_path, weights, fmt)
    assert code == 0, stderr
    check_progress(stderr, size)
    assert rss_kb < RSS_LIMIT_KB, f"peak RSS {rss_kb} KiB for a {size} byte input"
    if fmt == "default":
        with zipfile.ZipFile(tmp_path / "out" / "net.mar") as z:
            info = z.getinfo("weights.pt")
            assert (info.file_size, info.compress_type) == (size, zipfile.ZIP_DEFLATED)
            zeros, crc = bytes(1024 * 1024), 0
            for _ in range(size // len(zeros)):
                crc = zlib.crc32(zeros, crc)
            assert info.CRC == crc
    if fmt == "no-archive":
        assert (tmp_path / "out" / "net" / "weights.pt").stat().st_size == size


def test_small_inputs_print_nothing(tmp_path: Path) -> None:
    weights = tmp_path / "weights.pt"
    weights.write_bytes(b"x" * 1000)
    code, stderr, _ = archive_in_child(tmp_path, weights, "default")
    assert (code, stderr) == (0, "")
