"""tserve's archives served by the real TorchServe 0.12 (``torchserve==0.12.0`` from PyPI).

The other direction of test_archiver_compat.py: archives built by tserve's archiver, in every
format and handler spelling, are registered with TorchServe 0.12's own server and must answer.
TorchServe is installed without dependencies into a venv cached under ``.bench/archiver-compat-torchserve-0.12/``
(override with ``TSERVE_TORCHSERVE_012_VENV``); a ``.pth`` file lends it this venv's packages
(torch, PyYAML, psutil, Pillow), so pip never downloads torch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

import harness
import model_archiver

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ARCHIVER_ROOT = Path(model_archiver.__file__).resolve().parents[1]
VERSION = "0.12.0"
VENV = Path(os.environ.get("TSERVE_TORCHSERVE_012_VENV", REPO / ".bench" / "archiver-compat-torchserve-0.12"))

HANDLER = (Path(__file__).resolve().parent / "handlers" / "greeting_handler.py").read_text()
# model name: (archive format, --handler argument, registration url)
MODELS = {
    "t_mar": ("default", "handler.py:handle", "t_mar.mar"),
    "t_store": ("zip-store", "handler.py", "t_store.mar"),
    "t_tgz": ("tgz", "handler:handle", "t_tgz.tar.gz"),
    "t_dir": ("no-archive", "handler", "t_dir"),
}


@dataclass(frozen=True)
class Urls:
    inference: str
    management: str


def clean_env(**extra: str) -> dict[str, str]:
    # No PYTHONPATH: tserve's own `ts` package must not shadow TorchServe's.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TS_CONFIG_FILE")}
    env.update(extra)
    return env


def _borrow_our_packages(venv: Path) -> None:
    """TorchServe's own dependencies (torch among them) come from this venv through a .pth file."""
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, env=clean_env(), cwd="/").stdout.strip()
    Path(site, "zz-tserve-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


def install_torchserve(venv: Path) -> Path:
    bin_dir = harness.cached_venv(venv, ["--no-deps", f"torchserve=={VERSION}"], f"torchserve=={VERSION}",
                                  env=clean_env(), finish=_borrow_our_packages)
    return bin_dir / "torchserve"


@pytest.fixture(scope="module")
def torchserve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Urls]:
    exe = install_torchserve(VENV)
    root = tmp_path_factory.mktemp("torchserve012")
    src, store, tmp = root / "src", root / "store", root / "tmp"
    for d in (src, store, tmp):
        d.mkdir()
    (src / "handler.py").write_text(HANDLER)
    (src / "greeting.txt").write_text("hello")
    (src / "weights.bin").write_bytes(b"\x02" * 4321)
    (src / "model-config.yaml").write_text("minWorkers: 1\nmaxWorkers: 1\nbatchSize: 1\n")
    for name, (fmt, handler, _) in MODELS.items():
        args = ["--model-name", name, "--version", "2.0", "--handler", handler, "--serialized-file", "weights.bin",
                "--extra-files", "greeting.txt", "--config-file", "model-config.yaml", "--archive-format", fmt,
                "--export-path", str(store)]
        env = dict(os.environ, PYTHONPATH=str(ARCHIVER_ROOT))
        proc = subprocess.run([sys.executable, "-m", "model_archiver", *args], cwd=src, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr

    # Free ports from the harness; TorchServe ignores the keys it does not know.
    config = harness.server_config(store)
    cfg_path = harness.write_config(root / "config.properties", config)
    env = clean_env(TMPDIR=str(tmp), LOG_LOCATION=str(root / "logs"), METRICS_LOCATION=str(root / "logs"))
    out_path = root / "stdout.log"
    cmd = [str(exe), "--start", "--foreground", "--ncs", "--ts-config", str(cfg_path), "--model-store", str(store)]
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def ready() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"TorchServe exited ({proc.returncode}):\n{out_path.read_text()[-3000:]}")
        return "Model server started." in out_path.read_text(errors="replace")

    try:
        harness.wait_for(ready, 120, interval=0.2, what="TorchServe 0.12 to start")
        yield Urls(config["inference_address"], config["management_address"])
    finally:
        subprocess.run([str(exe), "--stop"], cwd=root, env=env, capture_output=True, timeout=60)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:  # the launcher and its JVM run in the process group started above
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


@pytest.mark.parametrize("name", list(MODELS))
def test_tserve_archive_served_by_torchserve_012(torchserve: Urls, name: str) -> None:
    url = MODELS[name][2]
    registered = requests.post(f"{torchserve.management}/models",
                               params={"url": url, "initial_workers": 1, "synchronous": "true"}, timeout=180)
    assert registered.status_code == 200, registered.text
    answer = requests.post(f"{torchserve.inference}/predictions/{name}", data=b"world",
                           headers={"Content-Type": "application/octet-stream"}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.text == "hello world weights=4321 batch=1"
    described = requests.get(f"{torchserve.management}/models/{name}", timeout=30).json()
    assert (described[0]["modelName"], described[0]["modelVersion"]) == (name, "2.0")
