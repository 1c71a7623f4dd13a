"""Build one archive from a config; also the ``torch-model-archiver`` console entry point.

Imports are absolute: TorchServe's test suites load this file on its own, as a module named
``archiver`` outside the package, and patch ``archiver.ArgParser.export_model_args_parser``."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from model_archiver.arg_parser import ArgParser
from model_archiver.artifacts import collect_entries
from model_archiver.manifest import MANIFEST_ARCNAME, manifest_json
from model_archiver.model_archiver_config import ModelArchiverConfig
from model_archiver.model_archiver_error import ModelArchiverError
from model_archiver.progress import Progress
from model_archiver.validation import check_choices, check_export_path, check_model_name, load_model_config
from model_archiver.writers import output_path, write_archive

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
    return _run(ArgParser.export_model_args_parser(argv))


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

    With no config it is the console script: as TorchServe's, it takes the config that
    ``ArgParser.export_model_args_parser()`` returns (looked up here at call time, so a patched
    ``ArgParser`` is honoured) and exits non-zero on error (it returns None on success, because
    console scripts exit with the return value). With a config it archives and returns the
    output path, raising ModelArchiverError.
    """
    if config is None:
        code = _run(ArgParser.export_model_args_parser())
        if code:
            sys.exit(code)
        return None
    return package_model(config)


if __name__ == "__main__":
    generate_model_archive()
