"""Load-time check that a handler's ``preprocess`` only uses state the pool process has.

The pool calls ``initialize_preprocess`` (never ``initialize``). A ``preprocess`` that reads
``self.tokenizer`` set only in ``initialize`` would fail on the first request; scanning the
bytecode of ``preprocess`` (and of the methods it calls on ``self``, nested comprehensions,
and ``super()`` calls) finds such attributes before any request arrives.
"""

from __future__ import annotations

import dis
import inspect
from types import CodeType
from typing import Any

_SELF_LOADS = {"LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_CHECK"}
_ATTR_LOADS = {"LOAD_ATTR", "LOAD_METHOD"}


def _code_of(obj: Any) -> CodeType | None:
    fn = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    return getattr(fn, "__code__", None)


def _scan(code: CodeType, self_name: str, loads: dict[str, str], stores: set[str],
          super_calls: set[str], where: str) -> None:
    prev: dis.Instruction | None = None
    after_super = False
    for ins in dis.get_instructions(code):
        if ins.opname == "LOAD_GLOBAL" and ins.argval == "super":
            after_super = True
        elif ins.opname in _ATTR_LOADS and after_super:
            super_calls.add(ins.argval)
            after_super = False
        elif prev is not None and prev.opname in _SELF_LOADS and prev.argval == self_name:
            if ins.opname in _ATTR_LOADS:
                loads.setdefault(ins.argval, where)
            elif ins.opname in ("STORE_ATTR", "DELETE_ATTR"):
                stores.add(ins.argval)
        prev = ins
    for const in code.co_consts:
        if isinstance(const, CodeType) and self_name in (const.co_freevars + const.co_cellvars + const.co_varnames):
            _scan(const, self_name, loads, stores, super_calls, where)


def missing_attributes(handler: Any, methods: tuple[str, ...] = ("preprocess",)) -> dict[str, str]:
    """{attribute: method that reads it} for ``self.X`` reads the handler object cannot satisfy."""
    cls = type(handler)
    loads: dict[str, str] = {}
    stores: set[str] = set()
    seen: set[CodeType] = set()
    todo: list[tuple[Any, str]] = [(inspect.getattr_static(cls, m, None), m) for m in methods]
    while todo:
        obj, name = todo.pop()
        code = _code_of(obj)
        if code is None or code in seen or code.co_argcount == 0:
            continue
        seen.add(code)
        super_calls: set[str] = set()
        before = set(loads)
        _scan(code, code.co_varnames[0], loads, stores, super_calls, getattr(obj, "__qualname__", name))
        for attr in set(loads) - before:
            static = inspect.getattr_static(cls, attr, None)
            if _code_of(static) is not None:
                todo.append((static, attr))
        for attr in super_calls:  # super().method(): scan every definition up the MRO
            todo.extend((klass.__dict__[attr], attr) for klass in cls.__mro__ if attr in klass.__dict__)
    return {a: w for a, w in loads.items() if a not in stores and not _has(handler, a)}


def _has(obj: Any, attr: str) -> bool:
    try:
        inspect.getattr_static(obj, attr)
        return True
    except AttributeError:
        return hasattr(obj, attr)  # __getattr__-based objects
