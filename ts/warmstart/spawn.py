"""The `torchserve` launcher starts the zygote itself, before the JVM, so that its ``import torch``
runs while the JVM boots and reads its configuration (docs/performance.md, "Warm starts").

The frontend adopts it (``--zygote PID:SOCKET``) and stops it at shutdown. The zygote's stdin is
a pipe whose only write end the frontend inherits: it reads EOF, and exits, when the frontend is
gone however it ended (the launcher closes its own copies once both processes run).

The launcher leaves the zygote to the frontend (returns None) whenever the frontend could see the
settings differently: warm starts off, ``enable_envvars_config`` (``TS_*`` variables may change
them) or ``${VAR}`` in one of them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ts.generated.config_defaults import CONFIG_DEFAULTS

KEYS = ("warm_worker_start", "warm_start_preload", "blacklist_env_vars")


@dataclass
class SpawnedZygote:
    proc: subprocess.Popen[bytes]
    socket: Path
    lifeline: int  # the write end the frontend must inherit (pass_fds)

    def java_args(self) -> list[str]:
        return ["--zygote", f"{self.proc.pid}:{self.socket}"]

    def handed_over(self) -> None:
        """The frontend runs and holds the lifeline: the launcher drops its copy."""
        os.close(self.lifeline)

    def abandon(self) -> None:
        """The frontend could not be started: the zygote goes too."""
        os.close(self.lifeline)
        self.proc.kill()
        self.proc.wait(10)


def setting(props: dict[str, str], key: str) -> str:
    """``key``'s value in the config file, else the frontend's default (ConfigKeys, via ts/generated)."""
    return props.get(key, CONFIG_DEFAULTS[key])


def wanted(props: dict[str, str]) -> bool:
    if setting(props, "enable_envvars_config").strip().lower() == "true":
        return False
    if any("${" in setting(props, k) for k in KEYS):
        return False
    return setting(props, "warm_worker_start").strip().lower() != "false"


def worker_env(props: dict[str, str], home: str) -> dict[str, str]:
    """The environment the frontend gives the zygote (WarmStarter): blacklist applied, home first on PYTHONPATH."""
    env = dict(os.environ)
    blacklist = setting(props, "blacklist_env_vars").strip()
    if blacklist:
        pattern = re.compile(blacklist)
        env = {k: v for k, v in env.items() if not pattern.fullmatch(k)}
    existing = os.environ.get("PYTHONPATH", "")
    env["PYTHONPATH"] = home + (os.pathsep + existing if existing else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


# AF_UNIX's sun_path on Linux: 108 bytes with the terminating NUL
MAX_SOCKET_PATH = 107


def socket_parent(tmp_dir: str) -> str:
    """``tmp_dir`` when ``<tmp_dir>/tsz-XXXXXXXX/zygote.sock`` fits AF_UNIX, else ``/tmp``."""
    longest = os.path.join(tmp_dir, "tsz-XXXXXXXX", "zygote.sock")
    return tmp_dir if len(os.fsencode(longest)) <= MAX_SOCKET_PATH else "/tmp"


def spawn(props: dict[str, str], home: str, tmp_dir: str | None, out: int | None) -> SpawnedZygote | None:
    """Starts ``python -m ts.warmstart.zygote`` for the frontend to adopt; None when the frontend should start it."""
    if not wanted(props) or not (Path(home) / "ts" / "warmstart" / "launch.py").is_file():
        return None
    sock_dir = Path(tempfile.mkdtemp(prefix="tsz-", dir=socket_parent(tmp_dir or tempfile.gettempdir())))
    sock = sock_dir / "zygote.sock"
    preload = setting(props, "warm_start_preload").strip()
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "ts.warmstart.zygote", "--socket", str(sock), "--preload", preload,
                                 "--exit-on-stdin-eof"], stdin=read_end, stdout=out, stderr=subprocess.STDOUT,
                                cwd=sock_dir, env=worker_env(props, home), start_new_session=True)
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    return SpawnedZygote(proc, sock, write_end)
