"""The archiver's own version, written into MANIFEST.json as ``archiverVersion``."""

from pathlib import Path

__version__ = (Path(__file__).parent / "version.txt").read_text().strip()
