"""The LLM scenario's engine alone: tserve's paged engine under the cell's closed loop, no server.

The bound (``llm_bound.py``) says what the model's forward can do; the served decode rate says
what tserve does behind its frontend and worker. This sits between them: the same ``PagedEngine``
the server runs, with the server's limits, stepped in a loop by ``clients`` simulated clients
that each send the next prompt of the scenario's list when their last answer ends. A finished
client's next request joins one step late (``DELAY_STEPS``): a served request's round trip
(the last token to the client, its next request back to the engine: ~1.8 ms warm) is shorter
than a step, so it arrives during the next step and joins the one after. Measured as the server
is: decode tokens (each request's tokens after its first) over the time not spent prefilling
(the engine's own split of each step, ``StepStats``).

So ``engine alone / bound`` is the engine's own efficiency, and ``served / engine alone`` what
serving it costs (the requests' trips, the frontend, worker and client sharing the cores).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

DELAY_STEPS = 1


def server_limits() -> dict[str, int]:
    """The served engine's limits, read from the model-config the server is given."""
    import yaml

    from benchmarks.llm import TSERVE_CONFIG

    handler = yaml.safe_load(TSERVE_CONFIG.read_text())["handler"]
    return {"max_context": handler["max_context"], "max_tokens_per_step": handler["max_tokens_per_step"]}


class EngineAlone:
    """``measure(seconds, clients)``: decode tokens/s of the paged engine under a closed loop."""

    def __init__(self, model: Any, tokenizer: Any, work: list[tuple[str, int]], max_batch_size: int) -> None:
        self.model, self.tokenizer, self.max_batch_size = model, tokenizer, max_batch_size
        self.work = [(tokenizer(p)["input_ids"], n) for p, n in work]
        self.limits = server_limits()

    def measure(self, seconds: float, clients: int, warmup_s: float = 0.5) -> dict[str, float]:
        """Run ``clients`` closed-loop clients for ``warmup_s`` then ``seconds``; the timed part's
        decode tokens/s (``decode_tokens_per_s``), rows per step and steps."""
        import torch

        from ts.llm.paged.engine import PagedEngine
        from ts.llm.params import SamplingParams

        engine = PagedEngine(self.model, self.tokenizer, max_batch_size=self.max_batch_size, **self.limits)
        engine.detokenize = False  # the server's engine process leaves text to the worker too
        requests = itertools.count()

        def send() -> None:
            i = next(requests)
            ids, new_tokens = self.work[i % len(self.work)]
            engine.add(f"r{i}", ids, SamplingParams(max_new_tokens=new_tokens, ignore_eos=True, temperature=0))

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
