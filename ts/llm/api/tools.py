"""Tool calls: OpenAI's ``tools`` and ``tool_choice`` on chat completions.

- ``tool_choice: "none"``: the tools reach the chat template, the model answers in text.
- ``"required"`` and a named function (``{"type": "function", "function": {"name": ...}}``): the
  output is constrained (ts/llm/api/structured.py) to one call, ``{"name": ..., "arguments": {...}}``,
  whose arguments follow the function's ``parameters`` schema; the answer carries it as
  ``tool_calls``. So even a model never trained for tools produces a valid call.
- ``"auto"`` (the default with tools): the model writes freely; its text becomes ``tool_calls`` when
  it is a call in the Hermes format most chat templates teach (``<tool_call>{json}</tool_call>``,
  one or more) or one bare JSON object ``{"name", "arguments"}`` naming a given tool, else it is the
  answer's content (vLLM's ``hermes`` parser's rule).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from ts.llm.api.structured import grammar_from_schema
from ts.llm.params import LLMRequestError, shown

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_ANY_OBJECT: dict[str, Any] = {"type": "object"}


def _bad(message: str, param: str = "tool_choice", code: str = "invalid_value") -> LLMRequestError:
    return LLMRequestError(400, message, param=param, code=code)


@dataclass
class ToolPolicy:
    """What a chat request's ``tools`` and ``tool_choice`` ask for."""

    mode: str  # none | auto | required | named
    tools: list[dict[str, Any]]
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)  # function name -> its parameters
    named: str | None = None

    @property
    def forced(self) -> bool:
        """The output is constrained to a call (required, named)."""
        return self.mode in ("required", "named")

    @property
    def parses_calls(self) -> bool:
        return self.mode != "none"

    @property
    def finish_reason(self) -> str:
        """OpenAI's: ``stop`` when a named function was forced, ``tool_calls`` otherwise."""
        return "stop" if self.mode == "named" else "tool_calls"

    def grammar(self) -> str | None:
        """The grammar of one call (required: any given function; named: that one), None otherwise."""
        if not self.forced:
            return None
        names = [self.named] if self.named else list(self.schemas)
        options = [{"type": "object", "properties": {"name": {"const": n}, "arguments": self.schemas[n]},
                    "required": ["name", "arguments"], "additionalProperties": False} for n in names]
        return grammar_from_schema(options[0] if len(options) == 1 else {"anyOf": options}, param="tools")

    def calls(self, text: str) -> list[dict[str, Any]] | None:
        """The OpenAI ``tool_calls`` the model's text holds, or None when it is an answer in text."""
        blocks = _HERMES.findall(text)
        candidates = blocks if blocks else [text.strip()]
        out = []
        for block in candidates:
            try:
                call = json.loads(block)
            except json.JSONDecodeError:
                return None
            if not (isinstance(call, dict) and call.get("name") in self.schemas and "arguments" in call):
                return None
            arguments = call["arguments"]
            out.append({"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                        "function": {"name": call["name"], "arguments": arguments if isinstance(arguments, str)
                                     else json.dumps(arguments, ensure_ascii=False)}})
        return out or None


def tool_policy(obj: dict[str, Any]) -> ToolPolicy | None:
    """The request's tool policy (None without ``tools``); a bad ``tools`` or ``tool_choice`` is a 400."""
    tools, choice = obj.get("tools"), obj.get("tool_choice")
    if tools is None or tools == []:
        if choice not in (None, "none"):
            raise _bad(f"tool_choice={shown(choice)} needs tools: send the functions in tools")
        return None
    if not isinstance(tools, list):
        raise _bad("tools must be a list of tool objects", param="tools")
    schemas: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type", "function") == "function" \
            else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise _bad(f"tools[{i}] must be {{\"type\": \"function\", \"function\": {{\"name\": ..., "
                       "\"parameters\": {...}}}}", param="tools")
        parameters = function.get("parameters", _ANY_OBJECT) if isinstance(function, dict) else _ANY_OBJECT
        if not isinstance(parameters, dict):
            raise _bad(f"tools[{i}].function.parameters must be a JSON schema object", param="tools")
        schemas[name] = parameters
    if choice is None:
        choice = "auto"
    if choice in ("none", "auto", "required"):
        return ToolPolicy(str(choice), tools, schemas)
    function = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    named = function.get("name") if isinstance(function, dict) else None
    if not isinstance(named, str):
        raise _bad(f"tool_choice must be none, auto, required or {{\"type\": \"function\", \"function\": "
                   f"{{\"name\": ...}}}}, got {shown(choice)}")
    if named not in schemas:
        raise _bad(f"tool_choice names function {shown(named)}, which is not in tools ({', '.join(schemas)})")
    return ToolPolicy("named", tools, schemas, named)
