"""``make typecheck``'s count of relaxed modules (test/support/mypy_relaxations.py)."""

from __future__ import annotations

import mypy_relaxations as relax

PYPROJECT = '''
[[tool.mypy.overrides]]
module = ["deepspeed.*"]
ignore_missing_imports = true

[[tool.mypy.overrides]]
module = [
    "ts.a",  # why a
    "ts.b",
]
ignore_errors = true

[[tool.mypy.overrides]]
module = "ts.c"
warn_return_any = false
'''


def test_counts_own_modules_under_a_relaxing_override_only() -> None:
    assert relax.relaxed_modules(PYPROJECT) == ["ts.a", "ts.b", "ts.c"]


def test_names_relaxed_modules_without_a_reason_comment() -> None:
    assert relax.without_reason(PYPROJECT, ["ts.a", "ts.b", "ts.c"]) == ["ts.b", "ts.c"]


def test_every_relaxation_in_the_project_has_its_reason() -> None:
    text = relax.PYPROJECT.read_text(encoding="utf-8")
    assert relax.without_reason(text, relax.relaxed_modules(text)) == []
