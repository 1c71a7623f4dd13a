"""Structured output's cost in the engine: tokens/s with ``response_format`` json_schema on and off.

    OMP_NUM_THREADS=1 python -m benchmarks.llm_constrained --rounds 5

The benchmark's tiny Llama (ts/testing/tiny_llm.py, hidden 256, 4 layers) generates a batch of
sequences in-process with the ``GenerationEngine`` (no server: the difference is the grammar's
per-step mask, which the server adds nothing to), sampled at temperature 1 with seeds, each run
with a fixed number of tokens (``ignore_eos``: a finished JSON object is followed by EOS tokens,
still masked every step). Plain and constrained runs alternate, round by round; the report is the
median tokens/s of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from ts.llm.api.structured import grammar_from_response_format
from ts.llm.engine.generation import GenerationEngine
from ts.llm.params import SamplingParams
from ts.testing.tiny_llm import build_model, build_tokenizer

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                           "tags": {"type": "array", "items": {"type": "string", "maxLength": 6},
                                                    "maxItems": 4}},
          "required": ["name", "age", "tags"], "additionalProperties": False}


def tokens_per_s(engine: GenerationEngine, ids: list[int], batch: int, new_tokens: int, grammar: str | None) -> float:
    work = [(f"s{i}", ids, SamplingParams(max_new_tokens=new_tokens, temperature=1.0, seed=i, ignore_eos=True,
                                          grammar=grammar)) for i in range(batch)]
    started = time.perf_counter()
    results = engine.generate_all(work)
    return sum(r.completion_tokens for r in results.values()) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=48)
    args = parser.parse_args()
    torch.manual_seed(0)
    tok = build_tokenizer()
    model = build_model(tok, hidden_size=256, num_layers=4)
    engine = GenerationEngine(model, tok, max_batch_size=args.batch, max_tokens_per_step=512)
    grammar = grammar_from_response_format({"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}})
    ids = tok("Once upon a time there was a little robot")["input_ids"]
    tokens_per_s(engine, ids, args.batch, 8, grammar)  # warm-up: the grammar's tokenizer is built once
    plain, constrained = [], []
    for _ in range(args.rounds):
        plain.append(tokens_per_s(engine, ids, args.batch, args.new_tokens, None))
        constrained.append(tokens_per_s(engine, ids, args.batch, args.new_tokens, grammar))
    report = {"batch": args.batch, "new_tokens": args.new_tokens, "rounds": args.rounds,
              "plain_tokens_per_s": round(statistics.median(plain), 1),
              "constrained_tokens_per_s": round(statistics.median(constrained), 1),
              "ratio": round(statistics.median(constrained) / statistics.median(plain), 3)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
