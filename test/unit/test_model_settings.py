"""The worker's settings object (ts/model_settings.py): read from LOAD, typed, checked, agreeing with
the frontend's LOAD through the shared vector test/protocol_vectors/load.json."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from ts.context import Context
from ts.model_loader import LoadError, LoadRequest
from ts.model_settings import ModelSettings, read_model_settings, resolve_model_yaml

LOAD_VECTOR = Path(__file__).resolve().parents[1] / "protocol_vectors" / "load.json"
WORKER_FIELDS = {"modelName", "modelVersion", "modelPath", "handler", "envelope", "gpuId", "limitMaxImagePixels",
                 "workerName"}


def test_the_load_vector_carries_every_setting_and_nothing_the_worker_does_not_read() -> None:
    load = json.loads(LOAD_VECTOR.read_text(encoding="utf-8"))["json"]
    settings = {f.name for f in dataclasses.fields(ModelSettings)}
    assert settings <= set(load), f"the frontend sends no {sorted(settings - set(load))}"
    assert set(load) - settings == WORKER_FIELDS
    req = LoadRequest.from_json(load)
    assert req.settings.preprocessWorkers == 2 and req.settings.maxBatchesInFlight == 4
    assert req.worker_name == "W-9000-mnist_1.0" and req.gpu_id == -1


def test_values_get_their_declared_types() -> None:
    s = read_model_settings({"deviceIds": [0, 3], "torchrun": {"nnodes": 2}, "continuousBatching": True})
    assert s.deviceIds == (0, 3) and s.torchrun == {"nnodes": 2} and s.continuousBatching is True
    assert s.batchSize == 1  # a field LOAD leaves out keeps the declared default
    assert pickle.loads(pickle.dumps(s)) == s
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.batchSize = 2  # type: ignore[misc]


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("batchSize", True, "must be an integer"),
    ("batchSize", "4", "must be an integer"),
    ("continuousBatching", 1, "must be true or false"),
    ("parallelType", "zz", "must be one of '', 'pp', 'tp', 'pptp', 'custom'"),
    ("deviceIds", [0, "1"], "must be a list of integers"),
    ("torchrun", [1], "must be an object"),
])
def test_a_mistyped_field_is_refused_naming_it(field: str, value: object, expected: str) -> None:
    with pytest.raises(LoadError, match=f"LOAD field '{field}' {expected}"):
        LoadRequest.from_json({"modelName": "m", "modelPath": "/m", field: value})


def test_a_context_built_without_load_has_the_settings_of_a_model_that_sets_nothing() -> None:
    ctx = Context("m", "/m", None, 4, 0, "test", model_yaml_config={"continuousBatching": True})
    assert ctx.model_settings == ModelSettings(batchSize=4, deviceType="gpu")
    assert ctx.model_yaml_config == {"continuousBatching": True}  # the archive's file, as written


def test_a_yaml_alone_resolves_as_the_frontend_resolves_it(tmp_path: Path) -> None:
    cfg = tmp_path / "model-config.yaml"
    cfg.write_text("asyncCommunication: true\nbatchSize: 3\nparallelType: tp\ntorchrun:\n  nproc-per-node: 2\n")
    s = resolve_model_yaml(str(cfg))
    assert (s.continuousBatching, s.batchSize, s.parallelType, s.parallelLevel) == (True, 3, "tp", 2)
    assert s.maxBatchesInFlight == 6  # in effect: 2 × batchSize with continuous batching
    cfg.write_text("batchSize: 0\n")
    with pytest.raises(ValueError, match="'batchSize' must be at least 1, got 0"):
        resolve_model_yaml(str(cfg))
    assert resolve_model_yaml(None) == ModelSettings()
