"""TorchServe 0.12's ``model_archiver.model_packaging_utils`` module name.

TorchServe's test suites speed up archiving with
``patch("model_archiver.model_packaging_utils.zipfile.ZipFile", lambda x, y, _: ZipFile(x, y, ZIP_STORED))``:
that patches the ``zipfile`` module itself, which tserve's writer (``writers``) opens archives with
as ``ZipFile(path, mode, compression)``, so the patch applies here too."""

import zipfile

__all__ = ["zipfile"]
