"""Micro-batching, TorchServe's handler utility (`from ts.handler_utils.micro_batching import
MicroBatching`): a handler sets ``self.handle = MicroBatching(self)``; each batch the worker hands
it is cut into micro-batches of ``micro_batch_size`` requests, and the handler's preprocess,
inference and postprocess run on different micro-batches at the same time, each stage on its own
threads (``parallelism``), so the accelerator gets the next micro-batch while the CPU prepares
the others. The answers come back in request order; a stage that raises fails the whole batch.

The model-config.yaml section TorchServe's example reads (``micro_batching: {micro_batch_size,
parallelism: {preprocess, inference, postprocess}}``) is the handler's to apply, as there.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

STAGES = ("preprocess", "inference", "postprocess")


class MicroBatching:
    def __init__(self, parent_handler: Any, micro_batch_size: int = 1,
                 parallelism: dict[str, int] | None = None) -> None:
        self.handler = parent_handler
        self.micro_batch_size = micro_batch_size
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._parallelism: dict[str, int] = {}
        self.parallelism = parallelism or dict.fromkeys(STAGES, 1)

    @property
    def parallelism(self) -> dict[str, int]:
        return dict(self._parallelism)

    @parallelism.setter
    def parallelism(self, value: dict[str, int]) -> None:
        unknown = set(value) - set(STAGES)
        if unknown:
            raise ValueError(f"micro_batching parallelism: unknown stage(s) {sorted(unknown)}; expected {STAGES}")
        merged = {**dict.fromkeys(STAGES, 1), **self._parallelism, **value}
        for stage, n in merged.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"micro_batching parallelism.{stage} must be a positive integer, got {n!r}")
        self.shutdown()
        self._parallelism = merged
        self._pools = {s: ThreadPoolExecutor(n, thread_name_prefix=f"micro-batching-{s}") for s, n in merged.items()}

    @property
    def micro_batch_size(self) -> int:
        return self._micro_batch_size

    @micro_batch_size.setter
    def micro_batch_size(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"micro_batch_size must be a positive integer, got {value!r}")
        self._micro_batch_size = value

    def shutdown(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=True)
        self._pools = {}

    def __call__(self, data: list[Any], context: Any) -> list[Any]:
        start = time.time()
        self.handler.context = context
        size = self._micro_batch_size
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        # each stage waits on the previous stage's future of the same micro-batch; the stages
        # have separate threads, so a waiting stage never holds up the one it waits for
        outputs = []
        for chunk in chunks:
            pre = self._pools["preprocess"].submit(self.handler.preprocess, chunk)
            inferred = self._pools["inference"].submit(_after, pre, self.handler.inference)
            outputs.append(self._pools["postprocess"].submit(_after, inferred, self.handler.postprocess))
        results: list[Any] = []
        for out in outputs:
            results.extend(out.result())
        if len(results) != len(data):
            raise ValueError(f"micro-batching: postprocess returned {len(results)} answers for {len(data)} requests")
        metrics = getattr(context, "metrics", None)
        if metrics is not None:
            metrics.add_time("HandlerTime", round((time.time() - start) * 1000, 2), None, "ms")
        return results


def _after(previous: Future[Any], stage: Any) -> Any:
    return stage(previous.result())
