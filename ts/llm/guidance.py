"""llguidance, the structured-output library (``pip install llguidance``), loaded when a request
first asks for structured output: the API layer compiles a request's schema into a grammar
(``api/structured.py``), the engine runs a matcher per sequence (``engine/grammar.py``)."""

from __future__ import annotations

from typing import Any

from ts.llm.params import LLMRequestError

MISSING = ("structured output (response_format json_object / json_schema) needs llguidance in the worker's "
           "Python: pip install llguidance")


def llguidance() -> Any:
    """The llguidance module (with its hf and torch parts); a 400 naming response_format without it."""
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch
    except ImportError:
        raise LLMRequestError(400, MISSING, param="response_format", code="unsupported_value") from None
    return llguidance
