"""Per-model Python dependencies (install_py_dep_per_model): pip installs an archive's
requirements into the model's own directory, first on the workers' PYTHONPATH, never into the
server's environment; a failed install fails the registration with pip's error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"


def build_tiny_wheel(root: Path) -> Path:
    """A one-module package built with `pip wheel`, so the test needs no index."""
    src = root / "src"
    src.mkdir()
    (src / "tserve_tiny_dep.py").write_text('def greet() -> str:\n    return "hello from tiny dep"\n')
    (src / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "tserve-tiny-dep"
        version = "0.1"

        [tool.setuptools]
        py-modules = ["tserve_tiny_dep"]
    """))
    wheels = root / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(src)], check=True, capture_output=True, timeout=300)
    return wheels


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("deps")
    wheels = build_tiny_wheel(root)
    store = root / "store"
    good = root / "good.txt"
    good.write_text(f"--no-index\n--find-links {wheels}\ntserve-tiny-dep\n")
    bad = root / "bad.txt"
    bad.write_text(f"--no-index\n--find-links {wheels}\ntserve-no-such-package==9.9\n")
    harness.build_mar(store, "withdeps", HANDLERS / "deps_handler.py", requirements_file=good)
    harness.build_mar(store, "baddeps", HANDLERS / "deps_handler.py", requirements_file=bad)
    with harness.Server(store, config={"install_py_dep_per_model": "true"}) as s:
        yield s


def test_requirements_are_installed_for_the_model_only(setup: harness.Server) -> None:
    r = setup.register("withdeps.mar", initial_workers=1)
    assert r.status_code == 200, r.text
    r = setup.predict("withdeps", b"x")
    assert r.status_code == 200, r.text
    assert r.text == "hello from tiny dep"
    assert "tserve-tiny-dep" in setup.logs("model_log.log") or "tserve_tiny_dep" in setup.logs("model_log.log")
    probe = subprocess.run([sys.executable, "-c", "import tserve_tiny_dep"], capture_output=True)
    assert probe.returncode != 0, "the dependency leaked into the server's environment"


def test_failed_install_fails_the_registration_with_pips_error(setup: harness.Server) -> None:
    r = setup.register("baddeps.mar", initial_workers=1)
    assert r.status_code == 400, r.text
    msg = r.json()["message"]
    assert "Custom pip package installation failed for model baddeps" in msg
    assert "tserve-no-such-package" in msg
    assert requests.get(setup.management_url + "/models/baddeps", timeout=10).status_code == 404


def test_use_venv_runs_the_workers_in_the_models_own_environment(setup: harness.Server, tmp_path: Path) -> None:
    good = tmp_path / "venv-reqs.txt"
    wheels = setup.model_store.parent / "wheels"
    good.write_text(f"--no-index\n--find-links {wheels}\ntserve-tiny-dep\n")
    harness.build_mar(setup.model_store, "invenv", HANDLERS / "venv_handler.py", requirements_file=good,
                      config_yaml="useVenv: true\n")
    r = setup.register("invenv.mar", initial_workers=1)
    assert r.status_code == 200, r.text
    described = requests.get(setup.management_url + "/models/invenv", timeout=10).json()[0]
    assert described["useVenv"] is True
    r = setup.predict("invenv", b"x")
    assert r.status_code == 200, r.text
    info = r.json()
    assert Path(info["prefix"]).name == "venv" and Path(info["prefix"]) != Path(sys.prefix)
    assert info["greeting"] == "hello from tiny dep"
    assert info["torch"]   # the server's packages stay visible behind the venv's own
    assert "useVenv" in setup.logs() and "virtual environment" in setup.logs()
    setup_dir = Path(info["prefix"])
    r = requests.delete(setup.management_url + "/models/invenv", timeout=60)
    assert r.status_code == 200, r.text
    harness.wait_for(lambda: not setup_dir.exists(), 30, what="the model's venv removed with the model")
