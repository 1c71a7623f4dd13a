"""Build one .war from a config; also the ``torch-workflow-archiver`` console entry point.

A .war is a zip holding the spec YAML, the handler .py and the extra files at its root, and
``WAR-INF/MANIFEST.json`` (``createdOn``, ``workflow``: ``workflowName``/``specFile``/``handler``,
``archiverVersion``), as TorchServe's. The file checks and the zip writer are the model
archiver's own.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from model_archiver.artifacts import Entry, extra_file_entries
from model_archiver.model_archiver_error import ModelArchiverError
from model_archiver.progress import Progress
from model_archiver.validation import check_export_path, load_model_config, require_file
from model_archiver.version import __version__
from model_archiver.writers import write_archive

from .arg_parser import ArgParser, WorkflowArchiverConfig, config_from_args

log = logging.getLogger("workflow_archiver")

MANIFEST_ARCNAME = "WAR-INF/MANIFEST.json"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_\-.]*$"


class WorkflowArchiverError(ModelArchiverError):
    """Bad input or a failed write; the message names the problem and the fix."""


def manifest_json(config: WorkflowArchiverConfig) -> str:
    workflow = {"workflowName": config.workflow_name, "specFile": os.path.basename(config.spec_file),
                "handler": os.path.basename(config.handler) if config.handler else ""}
    manifest = {"createdOn": datetime.now().strftime("%d/%m/%Y %H:%M:%S"), "workflow": workflow,
                "archiverVersion": __version__}
    return json.dumps(manifest, indent=2)


def check_spec(path: str, handler: str | None) -> dict[str, Any]:
    """The spec must parse as the server reads it: a mapping with a ``dag:`` mapping."""
    spec = load_model_config(path) or {}
    dag = spec.get("dag")
    if not isinstance(dag, dict) or not dag:
        raise WorkflowArchiverError(
            f"Spec file {path} has no 'dag:' section: map each node to the list of nodes it feeds, "
            "e.g. 'dag: {pre: [m1], m1: [post]}'.")
    models = spec.get("models") or {}
    if not isinstance(models, dict):
        raise WorkflowArchiverError(f"Spec file {path}: 'models:' must be a mapping of settings and model entries.")
    nodes = set(dag) | {n for targets in dag.values() if isinstance(targets, list) for n in targets}
    functions = sorted(n for n in nodes if n is not None and not isinstance(models.get(n), dict))
    if functions and not handler:
        raise WorkflowArchiverError(
            f"Spec file {path}: nodes {functions} are not models, so they must be functions in a "
            "handler file: pass --handler with a .py defining them.")
    return spec


def package_workflow(config: WorkflowArchiverConfig) -> str:
    """Validate every input, then write ``<export_path>/<workflow_name>.war``; returns its path."""
    if not config.workflow_name or not re.match(NAME_PATTERN, config.workflow_name):
        raise WorkflowArchiverError(
            f"Invalid workflow name {config.workflow_name!r}: use letters, digits, '_', '-' and '.', "
            f"starting with a letter or digit ({NAME_PATTERN}).")
    require_file(config.spec_file, "Spec file", "--spec-file")
    require_file(config.handler, "Handler file", "--handler")
    if config.handler and not config.handler.endswith(".py"):
        raise WorkflowArchiverError(f"Handler {config.handler} must be a Python file (.py) holding the workflow functions.")
    check_spec(config.spec_file, config.handler)
    check_export_path(config.export_path)
    entries = [Entry(os.path.basename(p), p) for p in (config.spec_file, config.handler) if p]
    if config.extra_files:
        entries += [e for e in extra_file_entries(config.extra_files) if e.arcname != MANIFEST_ARCNAME]
    target = os.path.join(config.export_path, config.workflow_name + ".war")
    if os.path.lexists(target):
        if not config.force:
            raise WorkflowArchiverError(
                f"{target} already exists.\nPlease specify --force/-f option to overwrite the workflow archive "
                "output file.\nSee -h/--help for more details.")
        log.warning("Overwriting %s ...", target)
    os.makedirs(config.export_path, exist_ok=True)
    progress = Progress(sum(e.size for e in entries), config.workflow_name)
    unique = list({e.arcname: e for e in entries}.values())   # a later file of the same name wins
    write_archive(target, config.workflow_name, "default", unique,
                  (MANIFEST_ARCNAME, manifest_json(config).encode("utf-8")), progress)
    log.info("Successfully exported workflow %s to file %s", config.workflow_name, target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: 0 on success, 1 with one ``error:`` paragraph on stderr (argparse exits 2)."""
    config = config_from_args(ArgParser.workflow_archiver_args_parser().parse_args(argv))
    logging.basicConfig(format="%(levelname)s - %(message)s")
    try:
        package_workflow(config)
    except ModelArchiverError as e:
        sys.stderr.write(f"torch-workflow-archiver: error: {e}\n")
        return 1
    return 0


def generate_workflow_archive() -> None:
    """TorchServe's console entry point, under the same name: exits non-zero on error."""
    code = main()
    if code:
        sys.exit(code)


if __name__ == "__main__":
    generate_workflow_archive()
