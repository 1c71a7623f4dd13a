"""Every pytest run in this repository leaves nothing in the temporary directory.

The session runs with a private TMPDIR (``<tmp>/tserve-pytest-*``, for this process and all it
spawns: servers, workers, torchrun jobs, archivers). At the end, whatever is still in it was left
behind by the code under test or by a test: the run fails and names each entry; the folder is then
removed. Other processes writing to /tmp at the same time cannot confuse the check.

pytest's own ``tmp_path`` folders stay where pytest keeps them (``<tmp>/pytest-of-<user>``, the
last three runs), and so do the work folders of the servers the harness starts (logs to read
after a failure). torch's compile cache goes to ``build/torchinductor``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

_PRIVATE_TMP = pytest.StashKey[tuple[str, str | None]]()


def pytest_configure(config: pytest.Config) -> None:
    outer = tempfile.gettempdir()
    # tmp_path's base folder is computed later from TMPDIR: keep it in the usual place
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", outer)
    private = tempfile.mkdtemp(prefix="tserve-pytest-", dir=outer)
    config.stash[_PRIVATE_TMP] = (private, os.environ.get("TMPDIR"))
    os.environ["TMPDIR"] = private
    tempfile.tempdir = private
    # Importing torch._dynamo (transformers does) makes torch's compile cache, <TMPDIR>/torchinductor_<user>:
    # a cache meant to last, so the suite keeps it in the repository's build folder.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "build", "torchinductor"))


@pytest.fixture(scope="session", autouse=True)
def _server_workdirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Servers started by the harness keep their work folder (logs) under pytest's tmp folders."""
    import harness

    harness.WORK_ROOT = tmp_path_factory.mktemp("srv")  # short: Unix socket paths live below it (108 bytes)
    yield
    harness.WORK_ROOT = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    private, previous = session.config.stash.get(_PRIVATE_TMP, (None, None))
    if private is None:
        return
    tempfile.tempdir = None
    if previous is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = previous
    try:
        leftovers = sorted(os.listdir(private))
    except FileNotFoundError:
        leftovers = []
    shutil.rmtree(private, ignore_errors=True)
    if not leftovers:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")  # end the progress line
        reporter.write_sep("=", "left behind in the temporary directory", red=True, bold=True)
        for name in leftovers:
            reporter.write_line(name)
        reporter.write_line(f"(in the session's TMPDIR {private}, now removed: find what creates them and clean up there)")
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
