"""``from model_archiver.manifest_components.manifest import RuntimeType`` as in TorchServe 0.12.

tserve builds MANIFEST.json in ``model_archiver.manifest``; this module keeps TorchServe's import
path for the runtime names that scripts pass to ``ModelArchiverConfig(runtime=...)``."""

from model_archiver.model_archiver_config import RuntimeType

__all__ = ["RuntimeType"]
