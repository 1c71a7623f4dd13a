"""The Python API class, as in TorchServe 0.12 (``ModelArchiver.generate_model_archive``)."""

from __future__ import annotations

from .model_archiver_config import ModelArchiverConfig
from .model_packaging import package_model


class ModelArchiver:
    @staticmethod
    def generate_model_archive(config: ModelArchiverConfig) -> str:
        """Write the archive described by ``config`` and return its path.

        Raises ModelArchiverError (message names the problem and the fix) on bad input.
        TorchServe returns None here; returning the path is a compatible extension.
        """
        return package_model(config)
