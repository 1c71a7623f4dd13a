"""Checks on the inputs, run before anything is written, each failing with a fix-it message."""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from .model_archiver_config import ARCHIVE_FORMATS, ModelArchiverConfig, RuntimeType
from .model_archiver_error import ModelArchiverError

MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_\-.]*$"


def check_model_name(name: str) -> None:
    """TorchServe's name rule (the frontend rejects other names when registering)."""
    if not name or not re.match(MODEL_NAME_PATTERN, name):
        raise ModelArchiverError(
            f"Invalid model name {name!r}: model name contains special characters.\n"
            f"The allowed regular expression filter for model name is: {MODEL_NAME_PATTERN}"
        )


def check_choices(config: ModelArchiverConfig) -> None:
    """Runtime and archive format must be ones the server understands."""
    runtimes = [r.value for r in RuntimeType]
    if config.runtime not in runtimes:
        raise ModelArchiverError(
            f"Invalid runtime {config.runtime!r}: choose one of {', '.join(runtimes)}."
        )
    if config.archive_format not in ARCHIVE_FORMATS:
        raise ModelArchiverError(
            f"Invalid archive format {config.archive_format!r}: "
            f"choose one of {', '.join(ARCHIVE_FORMATS)}."
        )
    if not config.handler:
        raise ModelArchiverError(
            "No handler given: pass --handler with a .py file, file.py:function, "
            "or a built-in handler name such as image_classifier."
        )


def require_file(path: str | None, what: str, flag: str) -> None:
    """An input that must be an existing regular file (or a link to one)."""
    if not path:
        return
    if not os.path.exists(path):
        raise ModelArchiverError(f"{what} not found: {path} (check the path given to {flag}).")
    if not os.path.isfile(path):
        raise ModelArchiverError(f"{what} is not a file: {path} ({flag} takes a file).")


def load_model_config(path: str) -> Any:
    """Parse model-config.yaml as the server will, so a broken file fails now, not at load."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except UnicodeDecodeError as e:
        raise ModelArchiverError(f"Config file {path} is not valid YAML: not UTF-8 text ({e}).") from e
    except yaml.YAMLError as e:
        raise ModelArchiverError(f"Config file {path} is not valid YAML: {_yaml_reason(e)}") from e
    if data is not None and not isinstance(data, dict):
        raise ModelArchiverError(
            f"Config file {path} must be a YAML mapping of keys (e.g. 'minWorkers: 1'), "
            f"not a {type(data).__name__}."
        )
    return data


def _yaml_reason(e: yaml.YAMLError) -> str:
    """'line N, column M: problem' from a PyYAML error (lines 1-based, as editors show them)."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    context = getattr(e, "context", None)
    detail = f"{context}; {problem}" if context else problem
    if mark is None:
        return detail
    return f"line {mark.line + 1}, column {mark.column + 1}: {detail}"


def check_export_path(export_path: str) -> None:
    """The export path may be missing (it is created) but must not be a file."""
    if os.path.exists(export_path) and not os.path.isdir(export_path):
        raise ModelArchiverError(
            f"Given export-path {export_path} is not a directory. "
            "Point to a valid export-path directory."
        )
