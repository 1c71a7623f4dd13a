"""Structured output: ``response_format`` (``json_object``, ``json_schema``) as a grammar that
masks the tokens a sequence may sample next, with llguidance (``pip install llguidance``).

Why llguidance: its wheel has no dependencies (xgrammar pulls triton and a torch pin, outlines-core
builds an index over the whole vocabulary per schema, which costs seconds for a large vocabulary);
it compiles JSON schemas lazily (a new schema costs next to nothing at request time) and computes
each step's masks for all constrained rows in parallel in Rust (the engine's side:
``ts/llm/engine/grammar.py``).

A request's grammar travels in ``SamplingParams.grammar`` (llguidance's grammar JSON, a string, so
tensor-parallel and pipeline ranks replay it); each sequence gets its own matcher (``Sequence.matcher``),
which consumes every token the sequence accepts.
"""

from __future__ import annotations

import json
from typing import Any

from ts.llm.guidance import llguidance
from ts.llm.params import LLMRequestError, shown


def constrains(response_format: Any) -> bool:
    """Whether ``response_format`` asks for structured output (anything but absent or text)."""
    return response_format is not None and not (isinstance(response_format, dict)
                                                and response_format.get("type") == "text")


def grammar_from_response_format(value: Any) -> str | None:
    """OpenAI's ``response_format`` as a grammar (None for plain text); a bad one is a 400."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        schema: Any = {"type": "object"}
    elif kind == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise LLMRequestError(400, "response_format json_schema needs json_schema.schema, a JSON schema object",
                                  param="response_format", code="invalid_value")
    else:
        raise LLMRequestError(400, "response_format.type must be text, json_object or json_schema, got "
                              f"{shown(kind)}", param="response_format", code="invalid_value")
    return grammar_from_schema(schema)


def grammar_from_schema(schema: dict[str, Any], param: str = "response_format") -> str:
    """The grammar of JSON text that validates against ``schema`` (compact: no free whitespace between
    tokens, what a client parses in the fewest tokens)."""
    try:
        matcher = llguidance().LLMatcher
    except LLMRequestError as exc:
        exc.param = param
        raise
    try:
        grammar = str(matcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False}))
    except (ValueError, TypeError, RecursionError) as exc:  # a schema llguidance cannot read
        raise LLMRequestError(400, f"{param}: the schema cannot be used: {exc}", param=param,
                              code="invalid_value") from None
    problem = matcher.validate_grammar(grammar)
    if problem:
        raise LLMRequestError(400, f"{param}: the schema cannot be used: {problem.strip()}", param=param,
                              code="invalid_value")
    return grammar


# vLLM's structured-output fields tserve implements (``guided_grammar`` is refused: its EBNF dialect
# is not llguidance's lark)
GUIDED = ("guided_json", "guided_regex", "guided_choice")


def grammar_from_guided(field: str, value: Any) -> str:
    """vLLM's ``guided_json`` (a schema, or its JSON text), ``guided_regex`` (the output matches
    the regular expression) or ``guided_choice`` (the output is one of the strings) as a grammar."""
    if field == "guided_json":
        schema = value
        if isinstance(value, str):
            try:
                schema = json.loads(value)
            except (ValueError, RecursionError):  # not JSON, or past the digit or nesting limits
                schema = None
        if not isinstance(schema, dict):
            raise LLMRequestError(400, "guided_json must be a JSON schema (an object, or its JSON text)",
                                  param=field, code="invalid_value")
        return grammar_from_schema(schema, param=field)
    matcher = llguidance().LLMatcher
    if field == "guided_regex":
        if not isinstance(value, str) or not value:
            raise LLMRequestError(400, "guided_regex must be a non-empty regular expression", param=field,
                                  code="invalid_value")
        grammar = str(matcher.grammar_from_regex(value))
    else:
        if not isinstance(value, list) or not value or not all(isinstance(c, str) and c for c in value):
            raise LLMRequestError(400, "guided_choice must be a non-empty list of non-empty strings", param=field,
                                  code="invalid_value")
        grammar = "start: " + " | ".join(json.dumps(c, ensure_ascii=False) for c in value)
    problem = matcher.validate_grammar(grammar)
    if problem:
        raise LLMRequestError(400, f"{field}: {problem.strip()}", param=field, code="invalid_value")
    return grammar
