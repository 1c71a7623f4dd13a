"""tserve: a TorchServe-compatible model server (Python half: CLI, backend worker, handler API)."""

from pathlib import Path

__version__ = (Path(__file__).parent / "version.txt").read_text().strip()
