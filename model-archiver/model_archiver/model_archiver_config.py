"""The archiver's options, one field per CLI flag (TorchServe 0.12's ``ModelArchiverConfig``)."""

from __future__ import annotations

import os
from argparse import Namespace
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Literal


class RuntimeType(Enum):
    """Values accepted by ``--runtime``, as in TorchServe's manifest."""

    PYTHON = "python"
    PYTHON3 = "python3"
    LSP = "LSP"


ArchiveFormat = Literal["default", "tgz", "no-archive", "zip-store"]
ARCHIVE_FORMATS: tuple[str, ...] = ("default", "tgz", "no-archive", "zip-store")


@dataclass
class ModelArchiverConfig:
    """Inputs of one archive; field names match TorchServe 0.12 so callers can switch."""

    model_name: str
    handler: str
    version: str
    serialized_file: str | None = None
    model_file: str | None = None
    extra_files: str | None = None
    runtime: str = RuntimeType.PYTHON.value
    # The working directory when the config is made (TorchServe froze it at import time).
    export_path: str = field(default_factory=os.getcwd)
    archive_format: ArchiveFormat = "default"
    force: bool = False
    requirements_file: str | None = None
    config_file: str | None = None

    @classmethod
    def from_args(cls, args: Namespace) -> ModelArchiverConfig:
        """Build a config from parsed CLI arguments (attribute names equal field names)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})
