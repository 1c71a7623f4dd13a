"""TorchServe 0.12's ``model_archiver.manifest_components`` package, kept for its import paths."""
