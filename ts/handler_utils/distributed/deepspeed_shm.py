"""Removal of the shared-memory files DeepSpeed's CPU all-reduce leaves behind.

DeepSpeed's shm comm op creates ``/dev/shm/deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_
<MASTER_PORT>_<rank>`` (about 66 MB each) and never unlinks them. A server that restarts
workers must remove them, or /dev/shm fills up. Call ``remove_deepspeed_shm_buffers`` after a
worker stopped (with the MASTER_ADDR/MASTER_PORT its ranks used, or without them to remove
every buffer of this user that no live process maps), or run
``python -m ts.handler_utils.distributed.deepspeed_shm [--master-addr A --master-port P]``.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

SHM_DIR = Path("/dev/shm")
PREFIX = "deepspeed_allreduce_buffer"


def buffer_prefix(uid: int | None = None, master_addr: str | None = None,
                  master_port: int | str | None = None) -> str:
    """The file-name prefix DeepSpeed uses (see deepspeed/ops/csrc/cpu/comm/shm.cpp)."""
    parts = [PREFIX, str(os.getuid() if uid is None else uid)]
    if master_addr is not None:
        parts.append(master_addr)
        if master_port is not None:
            parts.append(str(master_port))
    return "_".join(parts) + "_"


def mapped_shm_files() -> set[str]:
    """Names of /dev/shm files some live process (readable by us) has mapped."""
    names: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            with open(proc / "maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    if "/dev/shm/" in line:
                        names.add(line.rsplit("/dev/shm/", 1)[1].strip().removesuffix(" (deleted)"))
        except OSError:
            continue  # the process ended, or it is not ours
    return names


def remove_deepspeed_shm_buffers(master_addr: str | None = None,
                                 master_port: int | str | None = None,
                                 shm_dir: Path = SHM_DIR,
                                 only_unused: bool = True) -> list[Path]:
    """Delete this user's DeepSpeed all-reduce buffers; return the removed paths.

    With ``only_unused`` (the default) a file still mapped by a live process is kept, so the
    call is safe while other DeepSpeed workers run.
    """
    if master_addr is None and master_port is not None:
        raise ValueError("master_port needs master_addr (the file name holds both)")
    prefix = buffer_prefix(None, master_addr, master_port)
    if not shm_dir.is_dir():
        return []
    in_use = mapped_shm_files() if only_unused else set()
    removed: list[Path] = []
    for path in shm_dir.iterdir():
        if not path.name.startswith(prefix) or path.name in in_use:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    if removed:
        logger.info("removed %d DeepSpeed shm buffer(s): %s", len(removed), [p.name for p in removed])
    return removed


def own_buffer(rank: int, shm_dir: Path = SHM_DIR) -> Path | None:
    """This rank's buffer, named from the MASTER_ADDR/MASTER_PORT DeepSpeed read (None if unset)."""
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if addr is None or port is None:
        return None
    return shm_dir / f"{buffer_prefix(None, addr, port)}{rank}"


def remove_own_buffer_at_exit(rank: int) -> None:
    """Unlink this rank's buffer when the process exits normally (peers keep their mapping).

    A killed process cannot do this; ``remove_deepspeed_shm_buffers`` covers that case.
    """
    path = own_buffer(rank)
    if path is not None:
        atexit.register(path.unlink, missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master-addr")
    parser.add_argument("--master-port")
    parser.add_argument("--shm-dir", type=Path, default=SHM_DIR)
    args = parser.parse_args(argv)
    try:
        removed = remove_deepspeed_shm_buffers(args.master_addr, args.master_port, args.shm_dir)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in removed:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
