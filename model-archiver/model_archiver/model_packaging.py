"""Build one archive from a config; also the ``torch-model-archiver`` console entry point."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from .arg_parser import ArgParser, config_from_args
from .artifacts import collect_entries
from .manifest import MANIFEST_ARCNAME, manifest_json
from .model_archiver_config import ModelArchiverConfig
from .model_archiver_error import ModelArchiverError
from .progress import Progress
from .validation import check_choices, check_export_path, check_model_name, load_model_config
from .writers import output_path, write_archive

log = logging.getLogger("model_archiver")


def check_output(config: ModelArchiverConfig) -> str:
    """The output path; fails if it exists and ``force`` is off (TorchServe's wording)."""
    target = output_path(config.export_path, config.model_name, config.archive_format)
    if os.path.lexists(target):
        if not config.force:
            raise ModelArchiverError(
                f"{target} already exists.\n"
                "Please specify --force/-f option to overwrite the model archive output file.\n"
                "See -h/--help for more details."
            )
        log.warning("Overwriting %s ...", target)
    return target


def package_model(config: ModelArchiverConfig, manifest: str | None = None) -> str:
    """Validate every input, then stream them into the archive; returns the output path."""
    check_model_name(config.model_name)
    check_choices(config)
    check_export_path(config.export_path)
    entries = collect_entries(config)
    if config.config_file:
        load_model_config(config.config_file)
    target = check_output(config)
    os.makedirs(config.export_path, exist_ok=True)

    text = manifest if manifest is not None else manifest_json(config)
    total = sum(e.size for e in entries)
    progress = Progress(total, config.model_name)
    write_archive(target, config.model_name, config.archive_format, entries,
                  (MANIFEST_ARCNAME, text.encode("utf-8")), progress)
    log.info("Successfully exported model %s to file %s", config.model_name, target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: 0 on success, 1 with one ``error:`` paragraph on stderr (argparse exits 2)."""
    return _run(config_from_args(ArgParser.export_model_args_parser().parse_args(argv)))


def _run(config: ModelArchiverConfig) -> int:
    logging.basicConfig(format="%(levelname)s - %(message)s")
    try:
        package_model(config)
    except ModelArchiverError as e:
        sys.stderr.write(f"torch-model-archiver: error: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("torch-model-archiver: interrupted; no archive was written\n")
        return 130
    return 0


def generate_model_archive(config: ModelArchiverConfig | None = None) -> str | None:
    """TorchServe's entry point, under the same name.

    With no config it is the console script: as TorchServe's, it reads its options from
    ``ArgParser.export_model_args_parser().parse_args()`` (looked up here at call time, so a
    patched ``model_packaging.ArgParser`` is honoured) and exits non-zero on error (it returns
    None on success, because console scripts exit with the return value). With a config it
    archives and returns the output path, raising ModelArchiverError.
    """
    if config is None:
        code = _run(config_from_args(ArgParser.export_model_args_parser().parse_args()))
        if code:
            sys.exit(code)
        return None
    return package_model(config)


if __name__ == "__main__":
    generate_model_archive()
