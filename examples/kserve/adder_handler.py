"""The `adder` model of docs/kserve.md: a handler that works with either KServe envelope.

With `service_envelope=kserve` (v1) each item is one instance, a list of numbers: the answer is
its sum. With `service_envelope=kservev2` each item is an input tensor (`name`, `shape`,
`datatype`, `data`): the answer is the tensor added to itself, which the envelope returns as an
output tensor of the same shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def handle(data: list[Any] | None, context: Any) -> list[Any] | None:
    if data is None:  # called once at load time without data
        return None
    out: list[Any] = []
    for item in data:
        if isinstance(item, dict) and "data" in item:
            tensor = np.asarray(item["data"], dtype=np.float32).reshape(item["shape"])
            out.append(tensor + tensor)
        else:
            out.append(sum(item))
    return out
