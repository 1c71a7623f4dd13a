"""A function handler both TorchServe 0.12 and tserve serve: reads an extra file and the yaml at load time."""

import os

_state = {}


def handle(data, context):
    if data is None:  # TorchServe's load-time call of a function handler
        model_dir = context.system_properties["model_dir"]
        with open(os.path.join(model_dir, "greeting.txt")) as f:
            _state["greeting"] = f.read().strip()
        _state["weights"] = os.path.getsize(os.path.join(model_dir, context.manifest["model"]["serializedFile"]))
        _state["batch"] = context.model_yaml_config.get("batchSize")
        return None
    out = []
    for row in data:
        body = row.get("data") or row.get("body")
        if isinstance(body, (bytes, bytearray)):
            body = body.decode()
        out.append(f"{_state['greeting']} {body} weights={_state['weights']} batch={_state['batch']}")
    return out
