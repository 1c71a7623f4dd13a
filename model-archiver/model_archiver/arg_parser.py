"""The ``torch-model-archiver`` command line, flag for flag as in TorchServe 0.12."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from .model_archiver_config import ARCHIVE_FORMATS, ModelArchiverConfig, RuntimeType


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torch-model-archiver",
        description="Torch Model Archiver Tool (tserve): package a model into a .mar archive.",
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument(
        "--model-name", required=True,
        help="Exported model name; the archive is <export-path>/<model-name>.mar.\n"
        "Allowed: ^[A-Za-z0-9][A-Za-z0-9_\\-.]*$",
    )
    parser.add_argument(
        "--serialized-file",
        help="Path to the weights: .pt/.pth state_dict (eager), TorchScript, .onnx, .so ...",
    )
    parser.add_argument(
        "--model-file", help="Python file with the model class (eager mode models)."
    )
    parser.add_argument(
        "--handler", required=True,
        help="A built-in handler name (e.g. image_classifier) or a handler file:\n"
        "handler.py, handler.py:function or handler:function.",
    )
    parser.add_argument(
        "--extra-files",
        help="Comma-separated files, folders or glob patterns; a folder's contents\n"
        "are copied flat into the archive root.",
    )
    parser.add_argument(
        "--runtime", default=RuntimeType.PYTHON.value, choices=[r.value for r in RuntimeType],
        help='Language the handler runs in (default "python").',
    )
    parser.add_argument(
        "--export-path", default=None,
        help="Folder the archive is written to (default: the current directory;\n"
        "created if missing).",
    )
    parser.add_argument(
        "--archive-format", default="default", choices=list(ARCHIVE_FORMATS),
        help='"default": deflated zip <model-name>.mar\n'
        '"zip-store": stored (uncompressed) zip <model-name>.mar, fastest for big weights\n'
        '"tgz": <model-name>.tar.gz, every entry under <model-name>/\n'
        '"no-archive": plain folder <export-path>/<model-name>/ with MAR-INF/MANIFEST.json',
    )
    parser.add_argument(
        "-f", "--force", action="store_true",
        help="Overwrite an existing archive (or folder) of the same name.",
    )
    parser.add_argument("-v", "--version", required=True, help="Model version, e.g. 1.0.")
    parser.add_argument(
        "-r", "--requirements-file",
        help="requirements.txt with the model's pip dependencies (copied to the root).",
    )
    parser.add_argument(
        "-c", "--config-file",
        help="model-config.yaml (batchSize, minWorkers, ...), checked and copied to the root.",
    )
    return parser


class ArgParser:
    """TorchServe 0.12's ``model_archiver.arg_parser.ArgParser``: ``export_model_args_parser()``
    parses the command line and returns the config ``generate_model_archive()`` uses as is, so
    scripts and test suites written for TorchServe patch it with ``return_value=config``."""

    @staticmethod
    def export_model_args_parser(argv: Sequence[str] | None = None) -> ModelArchiverConfig:
        return parse_config(argv)


def config_from_args(args: argparse.Namespace) -> ModelArchiverConfig:
    """A config from parsed arguments; an unset export path means the current directory."""
    if getattr(args, "export_path", None) is None:
        args.export_path = os.getcwd()
    return ModelArchiverConfig.from_args(args)


def parse_config(argv: Sequence[str] | None = None) -> ModelArchiverConfig:
    """Parse the command line (``sys.argv`` when ``argv`` is None) into a config."""
    return config_from_args(build_parser().parse_args(argv))
