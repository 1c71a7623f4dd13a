"""The installed version, as TorchServe's ``ts.version`` (``from ts.version import __version__``).

``__version__`` is tserve's own (the package's, from ``ts/version.txt``); ``TORCHSERVE_VERSION``
is the TorchServe release whose interfaces tserve implements, which ``torchserve -v`` reports in
TorchServe's own words so that scripts parsing it keep working.
"""

from ts import __version__

TORCHSERVE_VERSION = "0.12.0"

__all__ = ["TORCHSERVE_VERSION", "__version__", "version_line"]


def version_line() -> str:
    """What ``torchserve -v`` prints: TorchServe's ``TorchServe Version is X``, then tserve's."""
    return f"TorchServe Version is {TORCHSERVE_VERSION} (tserve {__version__})"
