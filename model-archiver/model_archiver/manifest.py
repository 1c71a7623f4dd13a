"""MANIFEST.json, with TorchServe 0.12's field names, key order and value formats."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

from .model_archiver_config import ModelArchiverConfig
from .version import __version__

MAR_INF = "MAR-INF"
MANIFEST_FILE_NAME = "MANIFEST.json"
MANIFEST_ARCNAME = f"{MAR_INF}/{MANIFEST_FILE_NAME}"
CREATED_ON_FORMAT = "%d/%m/%Y %H:%M:%S"


def _basename(path: str | None) -> str | None:
    return os.path.basename(path) if path else None


def model_section(config: ModelArchiverConfig) -> dict[str, Any]:
    """The ``model`` object; optional keys appear only when set, in TorchServe's order."""
    model: dict[str, Any] = {"modelName": config.model_name}
    if config.serialized_file:
        model["serializedFile"] = _basename(config.serialized_file)
    # The basename of the raw argument: a ``:function`` suffix is kept for the worker.
    model["handler"] = os.path.basename(config.handler)
    if config.model_file:
        model["modelFile"] = _basename(config.model_file)
    if config.version:
        model["modelVersion"] = config.version
    if config.requirements_file:
        model["requirementsFile"] = _basename(config.requirements_file)
    if config.config_file:
        model["configFile"] = _basename(config.config_file)
    return model


def build_manifest(config: ModelArchiverConfig, now: datetime | None = None) -> dict[str, Any]:
    """The whole manifest as an ordered dict: createdOn, runtime, model, archiverVersion."""
    created = (now or datetime.now()).strftime(CREATED_ON_FORMAT)
    return {
        "createdOn": created,
        "runtime": config.runtime,
        "model": model_section(config),
        "archiverVersion": __version__,
    }


def manifest_json(config: ModelArchiverConfig, now: datetime | None = None) -> str:
    """The manifest text exactly as TorchServe writes it (``json.dumps(indent=2)``)."""
    return json.dumps(build_manifest(config, now), indent=2)
