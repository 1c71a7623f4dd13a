"""Which files go into the archive and under which names, without copying anything yet.

TorchServe copies everything into a staging folder first; tserve plans the entries and
streams each source straight into the archive, so a multi-GB checkpoint is read once.
"""

from __future__ import annotations

import glob
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from .manifest import MANIFEST_ARCNAME
from .model_archiver_config import ModelArchiverConfig, RuntimeType
from .model_archiver_error import ModelArchiverError
from .validation import require_file

# Handlers the server ships: named in the manifest, never copied (TorchServe 0.12's list).
BUILTIN_HANDLERS = (
    "base_handler",
    "text_classifier",
    "image_classifier",
    "object_detector",
    "image_segmenter",
    "dali_image_classifier",
    "vllm_handler",
    "trt_llm_handler",
)
# tserve's own built-in handlers, named in the manifest the same way
TSERVE_HANDLERS = ("llm_handler",)
BUILTIN_LSP_HANDLERS = ("BaseHandler", "TorchScriptHandler")
UNWANTED_DIRS = frozenset({"__MACOSX", "__pycache__"})
GLOB_CHARS = ("*", "?", "[")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """One archive member: its name inside the archive and the file it is read from."""

    arcname: str
    source: str

    @property
    def size(self) -> int:
        return os.path.getsize(self.source)


def handler_file(config: ModelArchiverConfig) -> str | None:
    """The handler file to copy, or None for a built-in handler.

    ``file.py:function`` and ``file:function`` name ``file.py`` (TorchServe 0.12 fails
    on the first form); a name without an extension gets ``.py`` (``.so``/``.dylib`` for LSP).
    """
    handler = config.handler
    lsp = config.runtime == RuntimeType.LSP.value
    if handler in (BUILTIN_LSP_HANDLERS if lsp else BUILTIN_HANDLERS + TSERVE_HANDLERS):
        return None
    path, sep, function = handler.rpartition(":")
    if not (sep and path and function.isidentifier()):
        path = handler
    if lsp:
        suffix = ".dylib" if sys.platform.startswith("darwin") else ".so"
    else:
        suffix = ".py"
    if not path.endswith(suffix):
        path += suffix
    if not os.path.isfile(path):
        builtins = ", ".join(BUILTIN_LSP_HANDLERS if lsp else BUILTIN_HANDLERS + TSERVE_HANDLERS)
        raise ModelArchiverError(
            f"Handler file not found: {path} (from --handler {handler}). --handler takes a "
            f"{suffix} file, file{suffix}:function, or a built-in handler name: {builtins}."
        )
    return path


def _keep_dir(name: str) -> bool:
    return name not in UNWANTED_DIRS and not name.startswith(".")


def _walk_tree(top: str, prefix: str) -> Iterator[Entry]:
    """Every file under ``top`` as ``prefix/relpath``, skipping __pycache__, __MACOSX, dot-dirs."""
    seen: set[str] = set()
    for root, dirs, files in os.walk(top, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:  # a symlink loop: stop descending
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if _keep_dir(d))
        rel_root = os.path.relpath(root, top)
        for name in sorted(files):
            rel = name if rel_root == "." else os.path.join(rel_root, name)
            path = os.path.join(root, name)
            if os.path.isfile(path):  # dangling links and sockets are left out
                yield Entry(_arc(os.path.join(prefix, rel)), path)


def _arc(path: str) -> str:
    return path.replace(os.sep, "/")


def _folder_entries(folder: str) -> Iterator[Entry]:
    """A folder's contents, flat at the archive root (the folder's own name is dropped)."""
    for item in sorted(os.listdir(folder)):
        path = os.path.join(folder, item)
        if os.path.isfile(path):
            yield Entry(item, path)
        elif os.path.isdir(path) and _keep_dir(item):
            yield from _walk_tree(path, item)


def extra_file_entries(extra_files: str) -> Iterator[Entry]:
    """``--extra-files``: comma-separated files, folders or glob patterns."""
    for raw in extra_files.split(","):
        spec = raw.strip()
        if not spec:
            continue
        is_glob = any(c in spec for c in GLOB_CHARS)
        if not is_glob and not os.path.exists(spec):
            raise ModelArchiverError(
                f"Extra file not found: {spec} (--extra-files takes comma-separated "
                "files, folders or glob patterns)."
            )
        matches = sorted(glob.glob(spec)) if is_glob else [spec]
        if is_glob and not matches:
            log.warning("Given wildcard pattern did not match any file: %s", spec)
        for match in matches:
            if os.path.isfile(match):
                yield Entry(os.path.basename(match), match)
            elif os.path.isdir(match):
                yield from _folder_entries(match)
            else:
                raise ModelArchiverError(f"Invalid extra file given: {match} (not a file or folder).")


def collect_entries(config: ModelArchiverConfig) -> list[Entry]:
    """All members in TorchServe's copy order; a later file of the same name wins, as there."""
    require_file(config.model_file, "Model file", "--model-file")
    require_file(config.serialized_file, "Serialized file", "--serialized-file")
    require_file(config.requirements_file, "Requirements file", "--requirements-file")
    require_file(config.config_file, "Config file", "--config-file")
    handler = handler_file(config)

    planned: dict[str, Entry] = {}

    def add(entry: Entry) -> None:
        if entry.arcname == MANIFEST_ARCNAME:
            log.warning("Ignoring %s: the archiver writes its own manifest", entry.source)
            return
        planned.pop(entry.arcname, None)  # keep insertion order = copy order
        planned[entry.arcname] = entry

    for path in (config.model_file, config.serialized_file, handler):
        if path:
            add(Entry(os.path.basename(path), path))
    if config.extra_files:
        for entry in extra_file_entries(config.extra_files):
            add(entry)
    for path in (config.requirements_file, config.config_file):
        if path:
            add(Entry(os.path.basename(path), path))
    return list(planned.values())
