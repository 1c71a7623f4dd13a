"""The one error type the archiver raises for bad input or a failed write."""


class ModelArchiverError(Exception):
    """Bad input (missing file, invalid name, existing output...) or a failed write.

    The message names the problem and how to fix it; the CLI prints it and exits 1.
    """
