"""The test harness itself: a server never outlives the test process that started it."""

import subprocess
import sys
from pathlib import Path

import harness


def test_server_stops_when_its_test_process_is_killed(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(harness.REPO / 'test' / 'support')!r})\n"
        "import harness\n"
        f"server = harness.Server({str(tmp_path)!r}, workdir={str(tmp_path / 'server')!r}).start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    assert harness.alive(pid)
    parent.kill()
    parent.wait()
    harness.wait_for(lambda: not harness.alive(pid), 30, what="the orphaned server to stop")
