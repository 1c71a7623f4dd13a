"""The LLM scenario's bound (``benchmarks/llm.py``): the model's own decode rate, no server.

A bare loop of the model's forward at tserve's running batch with the engine's KV cache layout,
run in a child process in its own session (``python -m benchmarks.llm_bound MODEL_DIR``: for each
"SECONDS BATCH" line it reads, one line "ENGINE HF ALONE PROCESS": tokens/s with the forward tserve's
engine runs (its fast path for this Llama: ``ts/llm/engine/fastpath``), then with Hugging Face's forward,
then the paged engine's decode rate under the cell's closed loop with no server, then the same
engine in its engine process driven from this one (``llm_alone.py``)). The first is the bound the
server is held to; the second shows what the fast path gained; the last two split the served gap
into the engine's own, the process split's and the rest of serving's.
"""

from __future__ import annotations

import inspect
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.llm import BATCH, NEW_TOKENS, THREAD_ENV, THREADS, TSERVE_BATCH, prompt_list
from benchmarks.servers import REPO, ServerError


def bound_batch(concurrency: int) -> int:
    """The batch tserve decodes at in a cell: every client's sequence, up to its slots."""
    return min(concurrency, TSERVE_BATCH)


class BareLoop:
    """The model's own bound: greedy decode at ``batch`` with a KV cache, no server, in this
    process with the workers' thread count. Each round prefills the next ``batch`` prompts
    (untimed, each alone) into the cache layout tserve's engine decodes with (``BatchCache``:
    preallocated, right-padded rows, written in place), then times ``steps`` decode steps; a
    first round warms up. With Hugging Face's ``DynamicCache`` (a concatenation per step, every
    row padded to the longest prompt) the loop read below tserve's own decode rate: it was no
    bound. ``steps`` is the mean ``max_new_tokens``, so the rows' lengths average the server's.
    ``round(engine_forward=True)`` decodes with the forward the engine chooses for the model (as
    the server runs it), ``False`` with the model's own Hugging Face forward."""

    def __init__(self, model_dir: Path, work: list[tuple[str, int]], batch: int = BATCH,
                 steps: int = sum(NEW_TOKENS) // 2) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(THREADS)
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        params = inspect.signature(self.model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        from ts.llm.engine.fastpath import choose_forward

        self.engine_forward, self.forward_path = choose_forward(self.model, None)
        self.batch, self.steps = batch, steps
        self.groups = itertools.cycle([work[i:i + batch]
                                       for i in range(0, len(work) - batch + 1, batch)])
        self.round()

    def round(self, engine_forward: bool = True) -> float:
        """Seconds of ``steps`` decode steps after an untimed prefill."""
        import torch
        from transformers import DynamicCache

        from ts.llm.engine.kvcache import BatchCache

        config = self.model.config
        with torch.inference_mode():
            cache = BatchCache(config.num_hidden_layers, self.batch,
                               config.max_position_embeddings, torch.device("cpu"))
            nxt = []
            for prompt, _ in next(self.groups):
                ids = torch.tensor([self.tok(prompt)["input_ids"]])
                own = DynamicCache(config=config)
                logits = self.model(input_ids=ids, use_cache=True, logits_to_keep=1,
                                    **{self.cache_kw: own}).logits
                cache.add_row([(layer.keys, layer.values) for layer in own.layers], ids.shape[1])
                nxt.append(logits[0, -1].argmax())
            tokens = torch.stack(nxt).unsqueeze(1)
            t0 = time.perf_counter()
            for _ in range(self.steps):
                pos, mask = cache.begin_step()
                if engine_forward and self.engine_forward is not None:
                    logits = self.engine_forward(tokens, pos, cache)
                else:
                    logits = self.model(input_ids=tokens, attention_mask=mask, position_ids=pos, use_cache=True,
                                        logits_to_keep=1, **{self.cache_kw: cache}).logits[:, -1]
                cache.end_step()
                tokens = logits.argmax(-1, keepdim=True)
            return time.perf_counter() - t0

    def measure(self, seconds: float, engine_forward: bool = True) -> float:
        """Decode tokens/s over whole rounds, at least one, for about ``seconds``."""
        timed, rounds = 0.0, 0
        while rounds == 0 or timed < seconds:
            timed += self.round(engine_forward)
            rounds += 1
        return self.batch * self.steps * rounds / timed


class BareLoopProcess:
    """``BareLoop`` in a child process in its own session, as each server runs in its own: with
    the kernel's autogroup scheduling a session is what shares the CPU out, so the bound in the
    benchmark's own process got less CPU than a server's worker (and read ~1.5x too low)."""

    def __init__(self, model_dir: Path) -> None:
        env = {**os.environ, **THREAD_ENV, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks.llm_bound",
                                      str(model_dir)], cwd=REPO, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     start_new_session=True)
        # "ready FORWARD": loaded and warmed up; which forward the engine runs for the model
        self.forward_path = self._answer().removeprefix("ready").strip()

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise ServerError(f"the bare loop exited with {self.proc.wait()}")
        return line.strip()

    def measure(self, seconds: float, batch: int) -> tuple[float, float, float, float]:
        """(tokens/s with the engine's forward, with Hugging Face's, the paged engine alone's
        decode rate, the same in its engine process), ``seconds`` each."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{seconds} {batch}\n")
        self.proc.stdin.flush()
        engine, hf, alone, process = self._answer().split()
        return float(engine), float(hf), float(alone), float(process)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _bare_loop_main(model_dir: str) -> None:
    """``python -m benchmarks.llm_bound DIR``: a line "ENGINE HF ALONE PROCESS" (tokens/s) per line
    "SECONDS BATCH"."""
    from benchmarks.llm_alone import EngineAlone, EngineProcessAlone

    # the answers keep stdout's pipe; anything else written to it (the engine process logs to its
    # stdout, which it inherits) goes to stderr
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    loops = {BATCH: BareLoop(Path(model_dir), prompt_list(), batch=BATCH)}
    alone = EngineAlone(loops[BATCH].model, loops[BATCH].tok, prompt_list(), TSERVE_BATCH)
    process = EngineProcessAlone(Path(model_dir), loops[BATCH].tok, prompt_list(), TSERVE_BATCH)
    print("ready", loops[BATCH].forward_path, file=answers, flush=True)
    try:
        for line in sys.stdin:
            seconds, batch = line.split()
            if int(batch) not in loops:
                loops[int(batch)] = BareLoop(Path(model_dir), prompt_list(), batch=int(batch))
            loop = loops[int(batch)]
            print(round(loop.measure(float(seconds)), 1), round(loop.measure(float(seconds), False), 1),
                  alone.measure(float(seconds), int(batch))["decode_tokens_per_s"],
                  process.measure(float(seconds), int(batch))["decode_tokens_per_s"], file=answers, flush=True)
    finally:
        process.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m benchmarks.llm_bound MODEL_DIR (the scenario itself: "
                 "python -m benchmarks.run --only llm)")
    _bare_loop_main(sys.argv[1])
