"""benchmarks/jvm_start.py: one bare start each way, measured from a real JVM."""

from __future__ import annotations

import pytest

from benchmarks import jvm_start
from ts.utils.java import archive_path


@pytest.mark.slow
def test_each_way_reports_a_start_and_the_jvms_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert jvm_start.main(["--runs", "1"]) == 0   # builds the archive first when make install has not
    assert archive_path().is_file()
    seconds, cpu = jvm_start.one_start(with_archive=True)
    assert seconds > 0 and cpu > 0
    out = capsys.readouterr().out
    assert "with the archive" in out and "without" in out and "median of 1" in out
