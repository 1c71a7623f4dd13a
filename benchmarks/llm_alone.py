"""The LLM scenario's engine alone: tserve's paged engine under the cell's closed loop, no server.

The bound (``llm_bound.py``) says what the model's forward can do; the served decode rate says
what tserve does behind its frontend and worker. This sits between them: the same paged engine (``paged_engine``)
the server runs, with the server's limits, stepped in a loop by ``clients`` simulated clients
that each send the next prompt of the scenario's list when their last answer ends. A finished
client's next request joins one step late (``DELAY_STEPS``): a served request's round trip
(the last token to the client, its next request back to the engine: ~1.8 ms warm) is shorter
than a step, so it arrives during the next step and joins the one after. Measured as the server
is: decode tokens (each request's tokens after its first) over the time not spent prefilling
(the engine's own split of each step, ``StepStats``).

So ``engine alone / bound`` is the engine's own efficiency, and ``served / engine alone`` what
serving it costs (the requests' trips, the frontend, worker and client sharing the cores).
``EngineProcessAlone`` splits that cost in two: the served engine in its engine process, as the
worker runs it, driven by this closed loop from another process that reads and detokenizes each
step as the worker does, with no frontend, worker loop or client: what the process split costs.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

DELAY_STEPS = 1


def served_settings() -> dict[str, Any]:
    """The handler block the paged variant is served with (its model-config.yaml)."""
    import yaml

    from benchmarks.llm import TSERVE_CONFIG, cache_config

    settings: dict[str, Any] = yaml.safe_load(cache_config(TSERVE_CONFIG.read_text(), True))["handler"]
    return settings


def server_limits(max_batch_size: int | None = None) -> dict[str, Any]:
    """The served engine's limits, from the model-config the server is given, as the handler
    derives them (``engine_limits``); ``max_batch_size``: the running sequences (default: the
    scenario's, ``TSERVE_BATCH``)."""
    from benchmarks.llm import TSERVE_BATCH
    from ts.llm.handler.settings import engine_limits

    return engine_limits(served_settings(), TSERVE_BATCH if max_batch_size is None else max_batch_size)


def _request(work: list[tuple[list[int], int]], i: int) -> tuple[str, list[int], Any]:
    """Request ``i`` of the scenario's list (cycled): its id, prompt ids and parameters."""
    from ts.llm.params import SamplingParams

    ids, new_tokens = work[i % len(work)]
    return f"r{i}", ids, SamplingParams(max_new_tokens=new_tokens, ignore_eos=True, temperature=0)


class EngineAlone:
    """``measure(seconds, clients)``: decode tokens/s of the paged engine under a closed loop."""

    def __init__(self, model: Any, tokenizer: Any, work: list[tuple[str, int]], max_batch_size: int) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.work = [(tokenizer(p)["input_ids"], n) for p, n in work]
        self.limits = server_limits(max_batch_size)

    def measure(self, seconds: float, clients: int, warmup_s: float = 0.5) -> dict[str, float]:
        """Run ``clients`` closed-loop clients for ``warmup_s`` then ``seconds``; the timed part's
        decode tokens/s (``decode_tokens_per_s``), rows per step and steps."""
        import torch

        from ts.llm.engine.paged.scheduler import paged_engine

        engine = paged_engine(self.model, self.tokenizer, **self.limits)
        engine.detokenize = False  # the server's engine process leaves text to the worker too
        requests = itertools.count()

        def send() -> None:
            engine.add(*_request(self.work, next(requests)))

        for _ in range(clients):
            send()
        due: list[int] = []  # the step numbers at which finished clients' next requests join
        step, steps, timed_from = 0, 0, None  # every step; the timed ones
        started = time.perf_counter()
        decode_tokens = prefill_s = 0.0
        with torch.inference_mode():
            while True:
                now = time.perf_counter()
                if timed_from is None:
                    timed_from = now if now - started >= warmup_s else None
                elif steps and now - timed_from >= seconds:  # at least one step timed
                    break
                updates = engine.step()
                step += 1
                due += [step + DELAY_STEPS] * sum(1 for u in updates if u.finished)
                while due and due[0] <= step:
                    due.pop(0)
                    send()
                if timed_from is not None:
                    decode_tokens += engine.last_step.decode_tokens
                    prefill_s += engine.last_step.prefill_s
                    steps += 1
        elapsed = time.perf_counter() - (timed_from or started)
        return {"decode_tokens_per_s": round(decode_tokens / max(elapsed - prefill_s, 1e-9), 1),
                "rows_per_step": round(decode_tokens / max(steps, 1), 2), "steps": steps}


class EngineProcessAlone:
    """``measure(seconds, clients)``: decode tokens/s of the served engine in its engine process
    (``EngineProcess`` with the served handler block and limits), driven from this process by
    ``clients`` closed-loop clients. A finished client's next request is sent as soon as the step's
    message is read, so it reaches the engine process during the next step, as a served one does.
    ``close()`` ends the engine process."""

    def __init__(self, model_dir: Path, tokenizer: Any, work: list[tuple[str, int]], max_batch_size: int) -> None:
        from ts.llm.process.engine_core import CoreConfig
        from ts.llm.process.engine_process import EngineProcess

        settings = served_settings()
        config = CoreConfig("llm-alone", str(model_dir), str(settings.get("dtype", "auto")), False, "cpu", settings,
                            server_limits(max_batch_size), settings.get("fast_path"))
        self.engine = EngineProcess(config, tokenizer)
        self.work = [(tokenizer(p)["input_ids"], n) for p, n in work]
        self.requests = itertools.count()

    def measure(self, seconds: float, clients: int, warmup_s: float = 0.5, min_requests: int = 0,
                deadline_s: float = 120.0) -> dict[str, float]:
        """Run ``clients`` clients for ``warmup_s`` then ``seconds`` (longer, until ``min_requests``
        finished in the timed part, however loaded the machine; an error past ``deadline_s``); the
        timed part's decode tokens/s (each request's tokens after its first, over the time the engine
        process did not spend prefilling) and its requests. The requests still running are then aborted."""
        engine = self.engine

        def send() -> None:
            seq_id, ids, params = _request(self.work, next(self.requests))
            engine.add_all([(seq_id, ids, [])], params)

        for _ in range(clients):
            send()
        started = time.perf_counter()
        timed_from: float | None = None
        decode_tokens = finished = timed = 0
        prefill_s = 0.0
        while True:
            now = time.perf_counter()
            if timed_from is None:
                timed_from = now if now - started >= warmup_s else None
            elif timed and now - timed_from >= seconds and finished >= min_requests:  # one step's message timed
                break
            if now - started > deadline_s:
                raise RuntimeError(f"{finished} of {min_requests} requests finished in {deadline_s:.0f} s")
            updates = engine.step()  # every step's message since the last call (waits for one)
            refused = [u.error for u in updates if u.error is not None]
            if refused:
                raise RuntimeError(f"the engine process refused a request: {refused[0]}")
            done = sum(1 for u in updates if u.finished)
            for _ in range(done):
                send()
            if timed_from is not None:
                decode_tokens += sum(len(u.new_token_ids) - (u.completion_tokens == len(u.new_token_ids))
                                     for u in updates)
                prefill_s += engine.last_step.prefill_s
                finished += done
                timed += bool(updates)
        elapsed = time.perf_counter() - (timed_from or started)
        engine.abort_all()
        while engine.has_work():  # the steps in flight when the clients stopped
            engine.step()
        return {"decode_tokens_per_s": round(decode_tokens / max(elapsed - prefill_s, 1e-9), 1),
                "requests": finished}

    def close(self) -> None:
        self.engine.close()
