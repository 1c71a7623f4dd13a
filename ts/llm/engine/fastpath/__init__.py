"""The engine's forward: its own lean one for the model families it knows, else Hugging Face's.

``choose_forward(model, use_fast)`` returns the fast forward (``llama.py``) or None (the engine
then calls the model's own forward), with a line saying which and why, for the worker's log.
``use_fast``: None picks the fast one when the model supports it, False forces Hugging Face's
forward (``handler.fast_path: false`` in model-config.yaml), True requires the fast one (an error
naming why a model does not support it).
"""

from __future__ import annotations

from typing import Any

from ts.handler_utils.distributed.config import ModelConfigError
from ts.llm.engine.fastpath.llama import SUPPORTED, LlamaFastForward, unsupported_reason

__all__ = ["SUPPORTED", "choose_forward"]


def choose_forward(model: Any, use_fast: bool | None) -> tuple[LlamaFastForward | None, str]:
    if use_fast is False:
        return None, "Hugging Face's forward (fast_path: false)"
    reason = unsupported_reason(model)
    if reason is None:
        return LlamaFastForward(model), "the engine's fast forward (ts/llm/engine/fastpath)"
    if use_fast:
        raise ModelConfigError(f"fast_path is true, but the engine's fast forward cannot run this model: {reason}; "
                         "set handler.fast_path to false or leave it out")
    return None, f"Hugging Face's forward (no fast path: {reason})"
