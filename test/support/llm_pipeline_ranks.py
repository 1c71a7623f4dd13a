"""One rank of the generation engine across pipeline stages, without the server.

    torchrun --nproc-per-node N test/support/llm_pipeline_ranks.py --layers L --new-tokens T \\
        --max-batch-size B --max-tokens-per-step S [--kv-cache-blocks K --block-size N] \
        --output out.json PROMPT...

Every rank builds the same tiny Llama (benchmarks/tiny_llm.py, seeded), keeps its own stage and runs
the same batch through ``PipelineEngine.generate_all``: the same commands on every rank, as the
coordinator gives them in the server. Rank 0 writes each prompt's generated token ids and
each rank's stage (its layers and parameter count) and the seconds generation took to
``--output``. With ``--kv-cache-blocks`` every rank runs ``PagedPipelineEngine`` over a pool of
that many blocks; after every step the ranks compare their block tables (they must be equal) and
check their pool's invariants, and rank 0 also writes its preemption and prefix-hit counts.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from benchmarks.tiny_llm import build_model, build_tokenizer
from ts.llm.engine import SamplingParams, SequenceUpdate
from ts.llm.pipeline_parallel import PagedPipelineEngine, PipelineEngine, PipelineStage


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--new-tokens", type=int, required=True)
    parser.add_argument("--max-batch-size", type=int, required=True)
    parser.add_argument("--max-tokens-per-step", type=int, required=True)
    parser.add_argument("--kv-cache-blocks", type=int)
    parser.add_argument("--block-size", type=int, default=4)
    parser.add_argument("--output", required=True)
    parser.add_argument("prompts", nargs="+")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tok = build_tokenizer()
    stage = PipelineStage(build_model(tok, num_layers=args.layers), rank, world, torch.device("cpu"))
    limits = {"max_batch_size": args.max_batch_size, "max_tokens_per_step": args.max_tokens_per_step}
    engine: PipelineEngine
    if args.kv_cache_blocks:
        engine = PagedPipelineEngine(stage, tok, num_blocks=args.kv_cache_blocks, block_size=args.block_size,
                                     **limits)
        engine.step = checked_step(engine, world)  # type: ignore[method-assign]
    else:
        engine = PipelineEngine(stage, tok, **limits)
    batch = [(str(i), tok(p)["input_ids"], SamplingParams(max_new_tokens=args.new_tokens))
             for i, p in enumerate(args.prompts)]
    # n=2 with logprobs: the fork and the logprobs the last stage computed reach rank 0
    batch.append(("n", tok(args.prompts[0])["input_ids"], SamplingParams(max_new_tokens=args.new_tokens, logprobs=2)))
    started = time.perf_counter()
    results = engine.generate_all(batch, {"n": ["n/1"]})
    seconds = time.perf_counter() - started
    stages = [None] * world
    dist.all_gather_object(stages, {"layers": [stage.start, stage.end],
                                    "parameters": sum(p.numel() for p in stage.model.parameters()),
                                    "cache_layers": engine._num_layers})
    paged = {}
    if isinstance(engine, PagedPipelineEngine):
        paged = {"preemptions": engine.preemptions, "prefix_hit": engine.prefix_stats.hit,
                 "storage_layers": len(engine.storage.keys), "steps": engine.steps_checked}
    if rank == 0:
        tokens = {args.prompts[int(k)]: r.token_ids for k, r in results.items() if k.isdigit()}
        forked = {k: [[e.token, e.logprob, e.top] for e in r.logprobs] for k, r in results.items() if k.startswith("n")}
        with open(args.output, "w") as f:
            json.dump({"tokens": tokens, "forked": forked, "stages": stages, "seconds": seconds, **paged}, f)
    dist.barrier()  # tearing gloo down while a peer is still at work aborts it now and then
    dist.destroy_process_group()


def checked_step(engine: PagedPipelineEngine, world: int) -> Callable[[], list[SequenceUpdate]]:
    """``engine.step``, then the ranks' block tables compared and the pool's invariants checked
    (every rank steps as often as rank 0: the same collectives in the same order)."""
    step = engine.step
    engine.steps_checked = 0  # type: ignore[attr-defined]

    def checked() -> list[SequenceUpdate]:
        updates = step()
        engine.pool.check(engine.live_tables())
        tables = {sid: t.blocks for sid, t in engine._tables.items()}
        every: list[Any] = [None] * world
        dist.all_gather_object(every, [tables, engine.pool.available])
        assert all(e == every[0] for e in every), f"the stages' block tables differ: {every}"
        engine.steps_checked += 1  # type: ignore[attr-defined]
        return updates
    return checked


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
