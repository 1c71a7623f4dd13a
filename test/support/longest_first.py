"""Runs the longest test modules first, so that `make test-python`'s two processes end together.

``--dist loadfile --no-loadscope-reorder`` (the Makefile's) hands whole modules to the xdist workers
in collection order (xdist's default reorders them by their count of tests instead); a module of
minutes collected last keeps one worker busy while the other idles (about 5 of the 41 minutes of a
full run on 2026-12-06). The modules below, the longest of that run by the sum of their tests'
durations (``--junitxml``), move to the front, longest first; every module keeps its own tests in
their order and together (module-scoped servers stay shared). Refresh the list from a full run's
``--durations`` when it drifts; a name that no longer exists is ignored.
"""

from __future__ import annotations

import pytest

LONGEST = (
    "test/integration/test_doc_commands.py",
    "test/unit/test_dist_handlers_torchrun.py",
    "test/integration/test_multinode.py",
    "test/integration/test_large_models_torchrun.py",
    "test/integration/test_readme.py",
    "test/unit/test_llm_engine_process.py",
    "test/integration/test_llm_parallel_paged.py",
    "test/unit/test_gpu_run_all.py",
    "test/integration/test_packaging.py",
    "test/integration/test_llm_openai_features.py",
    "test/unit/test_pool.py",
    "test/unit/test_worker.py",
    "test/unit/test_dist_handlers_worker.py",
    "test/integration/test_llm_hostile_inputs.py",
    "test/integration/test_llm_pp.py",
    "benchmarks/tests/test_llm_bench.py",
)
_RANK = {path: i for i, path in enumerate(LONGEST)}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::", 1)[0], i)

    def key(indexed: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        index, item = indexed
        module = item.nodeid.split("::", 1)[0]
        return (_RANK.get(module, len(LONGEST)), first_seen[module], index)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]
