"""One rank of the generation engine across pipeline stages, without the server.

    torchrun --nproc-per-node N test/support/llm_pipeline_ranks.py --layers L --new-tokens T \\
        --max-batch-size B --max-tokens-per-step S [--paged-blocks K --block-size Z] --output out.json PROMPT...

Every rank builds the same tiny Llama (ts/testing/tiny_llm.py, seeded), keeps its own stage and runs
the same batch through ``stage_engine(...).generate_all`` (with ``--paged-blocks``: the paged
cache, a pool of K blocks of Z tokens on every stage): the same commands on every
rank, as the coordinator gives them in the server. Rank 0 writes each prompt's generated token ids and
each rank's stage (its layers and parameter count) and the seconds generation took to
``--output``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time

import torch
import torch.distributed as dist

from ts.llm.engine.paged.scheduler import PagedKV
from ts.llm.engine.pipeline_parallel import PipelineStage, stage_engine
from ts.llm.params import SamplingParams
from ts.testing.tiny_llm import build_model, build_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--new-tokens", type=int, required=True)
    parser.add_argument("--max-batch-size", type=int, required=True)
    parser.add_argument("--max-tokens-per-step", type=int, required=True)
    parser.add_argument("--paged-blocks", type=int, default=0)
    parser.add_argument("--block-size", type=int, default=4)
    parser.add_argument("--output", required=True)
    parser.add_argument("prompts", nargs="+")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tok = build_tokenizer()
    stage = PipelineStage(build_model(tok, num_layers=args.layers), rank, world, torch.device("cpu"))
    limits = dict(max_batch_size=args.max_batch_size, max_tokens_per_step=args.max_tokens_per_step)
    engine = (stage_engine(stage, tok, **limits, kv_cache=functools.partial(
        PagedKV, num_blocks=args.paged_blocks, block_size=args.block_size))
              if args.paged_blocks else stage_engine(stage, tok, **limits))
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
                                    "cache_layers": engine.state.num_layers,
                                    "preemptions": getattr(engine.kv, "preemptions", None),
                                    "prefix_hits": engine.kv.prefix_stats.hit if args.paged_blocks else None})
    if rank == 0:
        tokens = {args.prompts[int(k)]: r.token_ids for k, r in results.items() if k.isdigit()}
        forked = {k: [[e.token, e.logprob, e.top] for e in r.logprobs] for k, r in results.items() if k.startswith("n")}
        with open(args.output, "w") as f:
            json.dump({"tokens": tokens, "forked": forked, "stages": stages, "seconds": seconds}, f)
    dist.barrier()  # no rank tears gloo down while another still talks to it (an abort at exit)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
