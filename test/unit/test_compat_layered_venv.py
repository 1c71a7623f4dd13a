"""test/compat/layered_venv.sh: the venv TorchServe's own tests run on sees the given python's
packages (torch among them), adds torchvision without pulling a second torch, and refuses a
torchvision pinned to another torch. A stand-in torchvision wheel, installed offline."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds venvs: left out of make test-quick

SCRIPT = Path(__file__).resolve().parents[1] / "compat" / "layered_venv.sh"
TORCH = pytest.importorskip("torch").__version__.split("+")[0]


def fake_torchvision(where: Path, version: str, torch_pin: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    wheel = where / f"torchvision-{version}-py3-none-any.whl"
    info = f"torchvision-{version}.dist-info"
    files = {
        "torchvision/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: torchvision\nVersion: {version}\n"
                             f"Requires-Dist: torch (=={torch_pin})\nRequires-Dist: pillow\n"),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]))
    return where


def build(tmp_path: Path, wheels: Path, spec: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), sys.executable, str(tmp_path / "venv"),
                           "--no-index", "--find-links", str(wheels)],
                          env={"PATH": "/usr/bin:/bin", "TORCHVISION": spec}, capture_output=True, text=True,
                          timeout=600)


def test_layers_torchvision_on_the_given_pythons_torch(tmp_path: Path) -> None:
    wheels = fake_torchvision(tmp_path / "wheels", "0.0.1", TORCH)
    done = build(tmp_path, wheels, "torchvision==0.0.1")
    assert done.returncode == 0, done.stderr
    venv = tmp_path / "venv"
    probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import torch, torchvision; print(torchvision.__file__); print(torch.__file__)"],
                           capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr
    tv_file, torch_file = probe.stdout.split()
    assert tv_file.startswith(str(venv)) and not torch_file.startswith(str(venv))
    assert not list(venv.glob("lib/python*/site-packages/torch"))   # no second torch
    script = (venv / "bin" / "torchserve").read_text()
    assert script.startswith(f"#!{venv}/bin/python\n") and "ts.model_server" in script
    for wheel in wheels.iterdir():   # built once: the second call needs no pip (nor the wheel)
        wheel.unlink()
    assert build(tmp_path, wheels, "torchvision==0.0.1").returncode == 0


def test_refuses_a_torchvision_pinned_to_another_torch(tmp_path: Path) -> None:
    wheels = fake_torchvision(tmp_path / "wheels", "0.0.2", "1.0.0")
    done = build(tmp_path, wheels, "torchvision==0.0.2")
    assert done.returncode != 0 and "requires torch==1.0.0" in done.stderr, done.stderr
