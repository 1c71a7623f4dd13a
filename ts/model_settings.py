"""The model's resolved settings, read from LOAD into one typed object (``context.model_settings``).

The frontend resolves every model-config.yaml key (config.properties ``models`` < the archive's
model-config.yaml < register parameters; ``asyncCommunication`` folded into ``continuousBatching``)
and sends the result in LOAD. Handlers read the keys the frontend resolves from here, never from the
archive's raw model-config.yaml (``context.model_yaml_config``, kept for the handler's own sections).
The fields and their defaults are declared once, in the frontend's ModelKeys:
ts/generated/model_settings.py is written from it.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import typing
from collections.abc import Mapping
from typing import Any, Literal

from ts.generated.model_settings import ModelSettings

__all__ = ["ModelSettings", "read_model_settings"]

_HINTS: dict[str, Any] = typing.get_type_hints(ModelSettings)


def _checked(name: str, hint: Any, value: Any) -> Any:
    """``value`` as the field's type, or ValueError naming the field and what it must be."""
    origin = typing.get_origin(hint)
    if hint is bool or hint is int:
        if type(value) is hint:  # bool is an int subclass: no True for a count, no 1 for a flag
            return value
        expected = "true or false" if hint is bool else "an integer"
    elif origin is Literal:
        if value in typing.get_args(hint):
            return value
        expected = "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    elif origin is tuple:
        if isinstance(value, list) and all(type(v) is int for v in value):
            return tuple(value)
        expected = "a list of integers"
    elif origin is Mapping:
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return dict(value)  # a copy (typed read-only); a plain dict pickles, a mappingproxy does not
        expected = "an object"
    else:  # a type PythonKeys writes but this reader does not know: the two must change together
        raise TypeError(f"model setting {name!r}: no reader for type {hint!r}")
    raise ValueError(f"LOAD field {name!r} must be {expected}, got {value!r}")


def read_model_settings(load: Mapping[str, Any]) -> ModelSettings:
    """The settings LOAD carries (a field it leaves out keeps its default); ValueError names a bad one."""
    given = {f.name: _checked(f.name, _HINTS[f.name], load[f.name])
             for f in dataclasses.fields(ModelSettings) if f.name in load}
    return ModelSettings(**given)


def resolve_model_yaml(path: str | None) -> ModelSettings:
    """The settings of a model whose only layer is the model-config.yaml at ``path`` (None: no file), as the
    frontend resolves them (the jar's org.tserve.wlm.registry.YamlSettings): for running a handler without the
    server, as examples/large_models/run_local.py does. ValueError carries the frontend's message."""
    if path is None:
        return ModelSettings()
    from ts.utils.java import find_java, frontend_jar

    done = subprocess.run([find_java(), "-cp", str(frontend_jar()), "org.tserve.wlm.registry.YamlSettings", path],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ValueError(done.stderr.strip() or f"the frontend could not resolve {path} (exit {done.returncode})")
    return read_model_settings(json.loads(done.stdout))
