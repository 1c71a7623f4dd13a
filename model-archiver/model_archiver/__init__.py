"""torch-model-archiver for tserve: packages a model into a TorchServe-compatible .mar.

Python API (as TorchServe 0.12's)::

    from model_archiver import ModelArchiver, ModelArchiverConfig
    path = ModelArchiver.generate_model_archive(
        ModelArchiverConfig(model_name="m", handler="handler.py", version="1.0"))
"""

from .model_archiver import ModelArchiver
from .model_archiver_config import ModelArchiverConfig, RuntimeType
from .model_archiver_error import ModelArchiverError
from .version import __version__

__all__ = [
    "ModelArchiver",
    "ModelArchiverConfig",
    "ModelArchiverError",
    "RuntimeType",
    "__version__",
]
