"""Every command the README shows is run here: the quick-start demo, then each "Pick your path" block as a
user would type it, on free ports (doc_commands)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import harness
from doc_commands import run_page

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


def test_readme_paths(tmp_path: Path) -> None:
    """Moving from TorchServe, serving an LLM (openai client, streaming, structured output, metrics): each
    block in order. A model across devices is run by examples/large_models/tp/README.md (its block says
    "run by"; test_doc_blocks checks the lines), the Kubernetes block is illustrative (a cluster)."""
    _, result = run_page(tmp_path, README, timeout=900)
    out = result.stdout
    scores = json.loads(out[out.index("{") : out.index("}") + 1])  # the migrated sentiment model
    assert scores["positive"] > scores["negative"]
    structured = next(line for line in out.splitlines() if line.startswith('{"answer"'))
    assert isinstance(json.loads(structured)["answer"], int)
    assert re.search(r'^llm_generation_tokens_total\{.*model_name="tiny_llm".*\} [1-9]', out, re.M), out
