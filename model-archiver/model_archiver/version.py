"""The archiver's own version, written into MANIFEST.json as ``archiverVersion``.

A constant rather than a data file, so the package works however it is installed.
"""

__version__ = "0.1.0"
