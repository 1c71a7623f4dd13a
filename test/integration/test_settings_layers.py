"""One setting, every layer (issue 41): continuousBatching set in config.properties' ``models``, in
model-config.yaml, through its alias asyncCommunication, or by the register API gives the same
worker pipeline and the same handler view (``context.model_settings``), and describe agrees. A
model whose yaml says true but whose register call says false runs, and believes, false."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

import harness

HANDLER = Path(__file__).resolve().parent / "handlers" / "settings_view_handler.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("layers")
    for name in ("in_models_json", "by_api", "unset"):
        harness.build_mar(store, name, HANDLER)
    harness.build_mar(store, "in_yaml", HANDLER, config_yaml="continuousBatching: true\n")
    harness.build_mar(store, "by_alias", HANDLER, config_yaml="asyncCommunication: true\n")
    harness.build_mar(store, "api_over_yaml", HANDLER, config_yaml="continuousBatching: true\n")
    models = {"in_models_json": {"1.0": {"continuousBatching": True}}}
    with harness.Server(store, {"models": json.dumps(models)}) as s:
        for name, params in (("in_models_json", {}), ("in_yaml", {}), ("by_alias", {}),
                             ("by_api", {"continuous_batching": "true"}), ("unset", {}),
                             ("api_over_yaml", {"continuous_batching": "false"})):
            r = s.register(f"{name}.mar", initial_workers=1, **params)
            assert r.status_code == 200, r.text
        yield s


def _seen(server: harness.Server, model: str) -> dict:
    r = server.predict(model, "x", timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _described(server: harness.Server, model: str) -> bool:
    r = requests.get(f"{server.management_url}/models/{model}", timeout=10)
    assert r.status_code == 200, r.text
    return bool(r.json()[0]["continuousBatching"])


@pytest.mark.parametrize("model", ["in_models_json", "in_yaml", "by_alias", "by_api"])
def test_every_layer_gives_the_same_pipeline_and_handler_view(server: harness.Server, model: str) -> None:
    seen = _seen(server, model)
    assert (seen["pipeline"], seen["continuousBatching"]) == ("steps", True), seen
    assert _described(server, model) is True


def test_the_alias_reaches_the_handler_folded_into_continuous_batching(server: harness.Server) -> None:
    assert _seen(server, "by_alias")["yaml"] == {"asyncCommunication": True}


@pytest.mark.parametrize("model", ["unset", "api_over_yaml"])
def test_a_model_that_resolves_to_false_runs_and_believes_false(server: harness.Server, model: str) -> None:
    seen = _seen(server, model)
    assert (seen["pipeline"], seen["continuousBatching"]) == ("batch", False), seen
    assert _described(server, model) is False
    if model == "api_over_yaml":  # the archive's raw file says otherwise; the handler does not go by it
        assert seen["yaml"] == {"continuousBatching": True}
