"""ts.handler_utils.micro_batching.MicroBatching, as TorchServe's micro-batching example uses it:
``self.handle = MicroBatching(self)``, then micro_batch_size and parallelism from the model's yaml."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from ts.handler_utils.micro_batching import MicroBatching
from ts.metrics.metric_cache_abstract import MetricCacheAbstract


class Doubler:
    """Records which micro-batches each stage saw, and whether two stages overlapped."""

    def __init__(self) -> None:
        self.seen: dict[str, list[list[int]]] = {"preprocess": [], "inference": [], "postprocess": []}
        self.inference_running = threading.Event()
        self.overlap = threading.Event()
        self.handle = MicroBatching(self)

    def preprocess(self, data: list[int]) -> list[int]:
        # a later micro-batch is prepared while the first one is in inference (which waits for it)
        if data[0] != 0 and self.inference_running.wait(timeout=5):
            self.overlap.set()
        self.seen["preprocess"].append(list(data))
        return list(data)

    def inference(self, data: list[int]) -> list[int]:
        self.inference_running.set()
        self.overlap.wait(timeout=5)
        self.seen["inference"].append(list(data))
        return [x * 2 for x in data]

    def postprocess(self, data: list[int]) -> list[int]:
        self.seen["postprocess"].append(list(data))
        return data


def context() -> Any:
    return SimpleNamespace(metrics=MetricCacheAbstract(model_name="m"))


def test_splits_the_batch_and_answers_in_request_order() -> None:
    h = Doubler()
    h.handle.micro_batch_size = 3
    h.handle.parallelism = {"preprocess": 2, "postprocess": 2}
    ctx = context()
    assert h.handle(list(range(8)), ctx) == [x * 2 for x in range(8)]
    assert sorted(h.seen["inference"]) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert h.handle.parallelism == {"preprocess": 2, "inference": 1, "postprocess": 2}
    assert h.overlap.is_set(), "a later micro-batch's preprocess ran while inference ran"
    assert h.context is ctx and [r["name"] for r in ctx.metrics.drain()] == ["HandlerTime"]


def test_a_failing_stage_fails_the_batch() -> None:
    h = Doubler()
    h.inference = lambda data: 1 / 0   # type: ignore[method-assign]
    with pytest.raises(ZeroDivisionError):
        h.handle([0, 1], context())


@pytest.mark.parametrize("settings", [{"micro_batch_size": 0}, {"parallelism": {"inference": 0}},
                                      {"parallelism": {"decode": 1}}])
def test_refuses_bad_settings(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        MicroBatching(Doubler(), **settings)
