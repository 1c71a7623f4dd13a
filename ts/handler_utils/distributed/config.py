"""Validation of the handler sections of model-config.yaml.

Every base handler declares the keys it reads; a wrong key or value fails the model load
with a message that names ``section.key`` and says what is expected, instead of a late
KeyError or a silent default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ts.model_loader import LoadError


class ModelConfigError(LoadError, ValueError):
    """A key of model-config.yaml is unknown or has a bad value: the load fails with this message
    alone (an expected error: one log line, no stack trace)."""


Check = Callable[[Any], bool]


@dataclass(frozen=True)
class KeySpec:
    """One accepted key: a predicate on its value and the wording used when it fails."""

    check: Check
    expected: str
    default: Any = None
    ignored: bool = False  # accepted for TorchServe compatibility, not used


def positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def non_negative_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def boolean(value: Any) -> bool:
    return isinstance(value, bool)


def string(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def anything(value: Any) -> bool:
    return True


def string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def mapping(value: Any) -> bool:
    return isinstance(value, dict)


def one_of(*choices: str) -> Check:
    return lambda value: isinstance(value, str) and value in choices


DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}

dtype_name = one_of(*DTYPES)


def to_dtype(name: str) -> torch.dtype:
    """Map a validated dtype name (``float32``, ``bf16``...) to a torch dtype."""
    return DTYPES[name]


def section(model_yaml_config: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """Return ``model_yaml_config[name]`` as a dict ({} when absent); reject a non-mapping."""
    cfg = model_yaml_config or {}
    if not isinstance(cfg, Mapping):
        raise ModelConfigError("model-config.yaml must be a mapping of keys to values")
    value = cfg.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelConfigError(
            f"model-config.yaml: section '{name}' must be a mapping of keys to values, "
            f"got {type(value).__name__}"
        )
    return dict(value)


def validate_section(
    name: str,
    values: Mapping[str, Any],
    spec: Mapping[str, KeySpec],
    allow_unknown: bool = False,
) -> dict[str, Any]:
    """Check ``values`` against ``spec``; return them with defaults filled in.

    Raises ModelConfigError naming ``name.key`` for an unknown key (unless allowed) or a
    value that fails its check.
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        ks = spec.get(key)
        if ks is None:
            if allow_unknown:
                out[key] = value
                continue
            known = ", ".join(sorted(k for k, s in spec.items() if not s.ignored))
            raise ModelConfigError(
                f"model-config.yaml: unknown key '{name}.{key}'; known keys of '{name}': {known}"
            )
        if not ks.check(value):
            raise ModelConfigError(
                f"model-config.yaml: '{name}.{key}' must be {ks.expected}, got {value!r}"
            )
        out[key] = value
    for key, ks in spec.items():
        if key not in out and ks.default is not None:
            out[key] = ks.default
    return out


HANDLER_SPEC: dict[str, KeySpec] = {
    "model_path": KeySpec(string, "a checkpoint folder (absolute, or relative to the model dir)"),
    "max_new_tokens": KeySpec(positive_int, "a positive integer"),
    "max_length": KeySpec(positive_int, "a positive integer"),
}


def handler_section(model_yaml_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The free-form ``handler`` section; only the keys the base handlers read are checked."""
    return validate_section(
        "handler", section(model_yaml_config, "handler"), HANDLER_SPEC, allow_unknown=True
    )
