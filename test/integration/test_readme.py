"""Every command the README shows is run here: the quick-start demo and the serve-your-own-model block."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import harness

pytestmark = pytest.mark.slow
README = harness.REPO / "README.md"


def readme_block(after_heading: str) -> str:
    section = README.read_text().split(f"## {after_heading}", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def private_env(tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Free ports (through TS_CONFIG_FILE, which the launcher reads first) and a private TMPDIR."""
    config = harness.server_config(tmp_path / "unused-store")
    config.pop("model_store")
    config_path = harness.write_config(tmp_path / "config.properties", config)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TS_CONFIG_FILE": str(config_path), "TMPDIR": str(tmp), "LOG_LOCATION": str(tmp_path / "logs")}
    return env, config


def test_quick_start_lists_the_two_commands() -> None:
    assert readme_block("Quick start").split() == ["make", "demo", "make", "test"]


def test_demo_prints_a_prediction(tmp_path: Path) -> None:
    env, config = private_env(tmp_path)
    env.update(INFERENCE_URL=config["inference_address"], DEMO_DIR=str(tmp_path / "demo"))
    result = subprocess.run(
        ["bash", "examples/image_classifier/demo.sh"], cwd=harness.REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    prediction = json.loads(result.stdout.split("Prediction for", 1)[1].split(":", 1)[1])
    labels = json.loads((harness.REPO / "examples/image_classifier/index_to_name.json").read_text()).values()
    assert len(prediction) == 5 and set(prediction) <= set(labels)
    assert 0 < sum(prediction.values()) <= 1.0001  # top-5 probabilities of a softmax


def test_serve_your_own_model_block(tmp_path: Path) -> None:
    env, config = private_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    for name in ("examples", ".venv"):
        (work / name).symlink_to(harness.REPO / name)
    script = readme_block("Serve your own model").replace("http://127.0.0.1:8080", config["inference_address"])
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    scores = json.loads(result.stdout[result.stdout.index("{") : result.stdout.index("}") + 1])
    assert scores["positive"] > scores["negative"]
    assert "TorchServe has stopped." in result.stdout
