"""Large-model handlers end to end through the real server (frontend + Python worker).

The Accelerate example runs in a plain worker (one process), so it needs no torchrun support
in the frontend: its answers must equal the unsplit model's, and a config asking it for
several ranks must fail the registration with a message naming the key.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import requests
import yaml

import harness

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "large_models"))

import local_check  # noqa: E402
from build_mar import build  # noqa: E402

pytestmark = pytest.mark.slow

ENV = {"HF_HUB_OFFLINE": "1"}


def _config(example: str, tmp: Path, **changes: object) -> Path:
    cfg = yaml.safe_load((ROOT / "examples" / "large_models" / example / "model-config.yaml").read_text())
    cfg.update(changes)
    path = tmp / f"{example}-model-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    build("accelerate", store)
    build("accelerate", store, model_name="accelerate_parallel",
          config_file=_config("accelerate", tmp_path_factory.mktemp("cfg"), parallelLevel=2))
    return store


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    model_dir = local_check.build_and_unpack("accelerate", tmp_path_factory.mktemp("ref"))
    return local_check.reference(model_dir, local_check.REQUESTS)


def test_accelerate_offload_through_the_server(store: Path, reference: list[dict]) -> None:
    with harness.Server(store, env=ENV) as server:
        r = server.register("tiny_llama_accelerate.mar", initial_workers=1, timeout=300)
        assert r.status_code == 200, r.text
        responses = []
        for req in local_check.REQUESTS:
            if isinstance(req, str):
                resp = server.predict("tiny_llama_accelerate", req, timeout=120)
            else:
                resp = requests.post(f"{server.inference_url}/predictions/tiny_llama_accelerate",
                                     json=req, timeout=120)
            assert resp.status_code == 200, resp.text
            responses.append(resp.json())
        assert responses[0]["prompt"] == "Hello"
        assert not local_check.compare(responses, reference)

        bad = server.predict("tiny_llama_accelerate", '{"prompt": ""}', timeout=120,
                             headers={"Content-Type": "application/json"})
        assert bad.status_code == 400, bad.text
        assert "non-empty text" in bad.json()["message"]
        long = requests.post(f"{server.inference_url}/predictions/tiny_llama_accelerate",
                             json={"prompt": "x" * 200}, timeout=120)
        assert long.status_code == 400 and "exceeds the model's 128 positions" in long.text


def test_accelerate_refuses_several_ranks(store: Path) -> None:
    with harness.Server(store, env=ENV) as server:
        r = server.register("accelerate_parallel.mar", initial_workers=1, timeout=300)
        assert r.status_code >= 400
        assert "runs the model in ONE process" in r.text and "Traceback" not in r.text
        assert "parallelLevel=2" in r.text
