"""The launcher's reading of config.properties takes its defaults from the frontend's ConfigKeys
(ts/generated/config_defaults.py; the frontend's PythonKeysTest fails when that file is stale)."""

from __future__ import annotations

from ts import model_server
from ts.generated.config_defaults import CONFIG_DEFAULTS
from ts.warmstart import spawn


def test_every_key_the_launcher_reads_has_the_frontends_default() -> None:
    for key in (*spawn.KEYS, "enable_envvars_config", "compatibility"):
        assert key in CONFIG_DEFAULTS, key
    assert spawn.setting({}, "warm_start_preload") == CONFIG_DEFAULTS["warm_start_preload"] == "torch"
    assert spawn.setting({"warm_start_preload": "numpy"}, "warm_start_preload") == "numpy"


def test_an_empty_config_means_what_the_frontend_defaults_mean() -> None:
    assert spawn.wanted({}) is (CONFIG_DEFAULTS["warm_worker_start"] == "true")
    assert model_server.torchserve_compatible({}) is (CONFIG_DEFAULTS["compatibility"] == model_server.COMPATIBILITY_TORCHSERVE)
