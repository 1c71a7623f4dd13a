"""The ``torch-workflow-archiver`` command line, flag for flag as in TorchServe 0.12."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from model_archiver.version import __version__


@dataclass
class WorkflowArchiverConfig:
    workflow_name: str
    spec_file: str
    handler: str | None = None
    extra_files: str | None = None
    export_path: str = "."
    force: bool = False


class ArgParser:
    """TorchServe's ``workflow_archiver.arg_parser.ArgParser`` (same static method name)."""

    @staticmethod
    def workflow_archiver_args_parser() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(
            prog="torch-workflow-archiver",
            description="Torch Workflow Archiver Tool (tserve): package a workflow into a .war archive.",
            formatter_class=argparse.RawTextHelpFormatter,
        )
        parser.add_argument(
            "--workflow-name", required=True,
            help="Exported workflow name; the archive is <export-path>/<workflow-name>.war.\n"
            "Allowed: ^[A-Za-z0-9][A-Za-z0-9_\\-.]*$",
        )
        parser.add_argument(
            "--spec-file", required=True,
            help="YAML workflow specification: models (global and per-model settings, url of each .mar)\n"
            "and dag (node: [next nodes]).",
        )
        parser.add_argument(
            "--handler",
            help="Python file with the workflow's function nodes: def fn(data, context) -> list.",
        )
        parser.add_argument(
            "--export-path", default=None,
            help="Folder the .war is written to (default: the current directory; created if missing).",
        )
        parser.add_argument(
            "-f", "--force", action="store_true",
            help="Overwrite an existing .war of the same name in the export path.",
        )
        parser.add_argument(
            "--extra-files",
            help="Comma-separated files, folders or glob patterns copied flat into the archive root.",
        )
        parser.add_argument("-v", "--version", action="version", version=f"torch-workflow-archiver {__version__} (tserve)")
        return parser


def config_from_args(args: argparse.Namespace) -> WorkflowArchiverConfig:
    return WorkflowArchiverConfig(
        workflow_name=args.workflow_name, spec_file=args.spec_file, handler=args.handler,
        extra_files=args.extra_files, export_path=args.export_path or os.getcwd(), force=args.force,
    )
