"""The paged KV cache in-process (no server): decode rate against the bare loop, and a
shared-prefix scenario with prefix caching on and off.

    python -m benchmarks.llm_paged [--device cpu|cuda] [--seconds 3] [--dry] [--model realistic --dtype bfloat16]

The model is the LLM benchmark's (``benchmarks/llm.py``: the tiny Llama at hidden 256, 4 layers,
seed 0; its context raised to 512 for the 320-token prompts), float32, one torch thread on CPU;
``--model realistic`` takes ``benchmarks/llm_shapes.py``'s Llama of a real shape (hidden 1024, 16
layers, context 1024) instead, ``--dtype`` either's dtype.

* **Decode vs the bare loop** at c8 and c32: the LLM benchmark's prompt mix (2-84 tokens,
  16-64 new tokens, ``ignore_eos``) in a closed loop of ``c`` sequences through the engine with
  the rectangle batch cache and with the paged cache (``ts/llm/engine/paged``), for ``--seconds`` each;
  decode tokens/s = decode tokens over the steps' decode time (``StepStats``). The bound: the
  engine's fast forward in a bare loop at the same batch (prompts prefilled untimed into a
  ``BatchCache``, then 40 timed decode steps), as ``benchmarks/llm_bound.py`` measures it.
* **Shared prefix**, c8: a 300-token system prompt + distinct 20-token questions, 16-64 new
  tokens each (seeded, as the LLM benchmark's), 32 requests run to completion: time to first
  token p50 (from ``add`` to the step that yields it) and generated tokens/s, with prefix caching
  on and off (paged) and the rectangle engine; beside them the bare loop that re-prefills every
  prompt (each prefilled alone, timed, then 40 decode steps at batch 8): the bound of any engine
  that does not reuse the prefix.

Prints one table per scenario. ``--dry`` (test/gpu/run_all.sh --dry): c8 only, fewer requests.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from collections.abc import Iterator
from typing import Any

import torch

from benchmarks.llm import HIDDEN, LAYERS, NEW_TOKENS, SEED, prompt_list

SYSTEM_TOKENS, QUESTION_TOKENS, SHARED_REQUESTS = 300, 20, 32
BOUND_NEW_TOKENS = sum(NEW_TOKENS) // 2  # the re-prefill bound decodes the mean
BOUND_STEPS = 40


def build(device: str, model_name: str = "toy", dtype: str = "float32") -> tuple[Any, Any]:
    from benchmarks.llm_shapes import SHAPES, build_llama
    from ts.testing.tiny_llm import build_model, build_tokenizer

    tok = build_tokenizer()
    if model_name == "realistic":
        model = build_llama(tok, SHAPES["realistic"], seed=SEED)
    else:
        model = build_model(tok, seed=SEED, hidden_size=HIDDEN, num_layers=LAYERS, max_position_embeddings=512)
    return model.to(device=device, dtype=getattr(torch, dtype)), tok


def engine(kind: str, model: Any, tok: Any, batch: int) -> Any:
    from ts.llm.engine.generation import GenerationEngine
    from ts.llm.engine.paged.scheduler import paged_engine

    limits = {"max_batch_size": batch, "max_tokens_per_step": 512, "max_waiting": 1024}
    if kind == "rectangle":
        return GenerationEngine(model, tok, **limits)
    return paged_engine(model, tok, prefix_caching=kind == "paged", **limits)


def closed_loop(eng: Any, work: Iterator[tuple[list[int], int]], concurrency: int, seconds: float | None,
                requests: int | None = None) -> dict[str, float]:
    """``concurrency`` sequences kept in the engine until ``seconds`` pass (or ``requests`` finish)."""
    from ts.llm.params import SamplingParams

    added: dict[str, float] = {}
    ttft: list[float] = []
    counter = itertools.count()
    started = time.perf_counter()
    issued = 0

    def add() -> None:
        nonlocal issued
        ids, n = next(work)
        seq_id = f"r{next(counter)}"
        eng.add(seq_id, ids, SamplingParams(max_new_tokens=n, ignore_eos=True))
        added[seq_id] = time.perf_counter()
        issued += 1

    for _ in range(concurrency if requests is None else min(concurrency, requests)):
        add()
    tokens = decode_tokens = finished = 0
    decode_s = 0.0
    while eng.has_work():
        updates = eng.step()
        now = time.perf_counter()
        decode_tokens += eng.last_step.decode_tokens
        decode_s += eng.last_step.decode_s
        for u in updates:
            tokens += len(u.new_token_ids)
            if u.seq_id in added and u.new_token_ids:
                ttft.append(now - added.pop(u.seq_id))
            if u.finished:
                finished += 1
                more = (seconds is not None and now - started < seconds) or (requests is not None and issued < requests)
                if more:
                    add()
        if seconds is not None and now - started >= seconds:
            eng.abort_all()
    elapsed = time.perf_counter() - started
    return {"tokens_per_s": tokens / elapsed, "decode_per_s": decode_tokens / decode_s if decode_s else 0.0,
            "ttft_p50_ms": 1000 * statistics.median(ttft), "finished": finished}


def bare_loop(model: Any, prompts: list[list[int]], steps: int) -> tuple[float, float]:
    """(seconds prefilling each prompt alone, seconds of ``steps`` decode steps at the batch),
    with the engine's fast forward and its rectangle cache."""
    from transformers import DynamicCache

    from ts.llm.engine.fastpath import choose_forward
    from ts.llm.engine.kvcache import BatchCache

    fwd, _ = choose_forward(model, True)
    assert fwd is not None
    device = next(model.parameters()).device
    cache = BatchCache(model.config.num_hidden_layers, len(prompts), model.config.max_position_embeddings, device)
    with torch.inference_mode():
        t0 = time.perf_counter()
        first = []
        for ids in prompts:
            own = DynamicCache(config=model.config)
            logits = fwd(torch.tensor([ids], device=device), torch.arange(len(ids), device=device).unsqueeze(0), own)
            cache.add_row([(layer.keys, layer.values) for layer in own.layers], len(ids))
            first.append(int(logits[0].argmax()))
        t1 = time.perf_counter()
        tokens = torch.tensor(first, device=device).unsqueeze(1)
        for _ in range(steps):
            positions, _ = cache.begin_step()
            logits = fwd(tokens, positions, cache)
            cache.end_step()
            tokens = logits.argmax(-1, keepdim=True)
        tokens.tolist()  # waits for the device
        return t1 - t0, time.perf_counter() - t1


def mix(tok: Any) -> Iterator[tuple[list[int], int]]:
    return itertools.cycle([(tok(p)["input_ids"], n) for p, n in prompt_list()])


def shared_prefix_work(tok: Any) -> list[tuple[list[int], int]]:
    from ts.testing.tiny_llm import CORPUS

    words = CORPUS.split()
    system = tok(" ".join(words * 4))["input_ids"][:SYSTEM_TOKENS]
    rng = random.Random(SEED)
    out = []
    for i in range(SHARED_REQUESTS):
        question = tok(" ".join(words[3 * i:]), add_special_tokens=False)["input_ids"][:QUESTION_TOKENS]
        out.append((system + question, rng.randint(*NEW_TOKENS)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--dry", action="store_true", help="c8 only, 8 shared-prefix requests")
    parser.add_argument("--model", default="toy", choices=["toy", "realistic"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tok = build(args.device, args.model, args.dtype)
    config = model.config
    print(f"device {args.device}, {args.model} Llama hidden {config.hidden_size}, {config.num_hidden_layers} layers, "
          f"{args.dtype}, {torch.get_num_threads()} thread(s)")
    print("\n| c | bound decode tok/s | rectangle decode tok/s | paged decode tok/s | rectangle / bound | paged / bound |")
    print("|---|---|---|---|---|---|")
    prompts = [ids for ids, _ in itertools.islice(mix(tok), 64)]
    for c in ((8,) if args.dry else (8, 32)):
        closed_loop(engine("paged", model, tok, c), mix(tok), c, 0.2)  # warm-up
        pre, dec = bare_loop(model, prompts[:c], BOUND_STEPS)
        bound = c * BOUND_STEPS / dec
        rect = closed_loop(engine("rectangle", model, tok, c), mix(tok), c, args.seconds)["decode_per_s"]
        paged = closed_loop(engine("paged", model, tok, c), mix(tok), c, args.seconds)["decode_per_s"]
        print(f"| {c} | {bound:.0f} | {rect:.0f} | {paged:.0f} | {rect / bound:.2f} | {paged / bound:.2f} |")
    work = shared_prefix_work(tok)[:8 if args.dry else SHARED_REQUESTS]
    pre, dec = bare_loop(model, [ids for ids, _ in work[:8]], BOUND_NEW_TOKENS)
    reprefill = 8 * BOUND_NEW_TOKENS / (pre + dec)
    print(f"\nshared prefix: {SYSTEM_TOKENS}-token system prompt + {QUESTION_TOKENS}-token questions, "
          f"{NEW_TOKENS[0]}-{NEW_TOKENS[1]} new tokens, c8, {len(work)} requests; bare loop re-prefilling every "
          f"prompt: {reprefill:.0f} tok/s")
    print("\n| engine | TTFT p50 ms | generated tok/s | / re-prefill bound |")
    print("|---|---|---|---|")
    results = {}
    for kind, label in (("paged", "paged, prefix caching on"), ("paged-off", "paged, prefix caching off"),
                        ("rectangle", "rectangle cache")):
        r = closed_loop(engine(kind, model, tok, 8), iter(work), 8, None, requests=len(work))
        results[kind] = r
        print(f"| {label} | {r['ttft_p50_ms']:.1f} | {r['tokens_per_s']:.0f} | {r['tokens_per_s'] / reprefill:.2f} |")
    ratio = results["paged"]["ttft_p50_ms"] / results["paged-off"]["ttft_p50_ms"]
    print(f"\nTTFT p50 prefix caching on / off: {ratio:.2f}")


if __name__ == "__main__":
    main()
