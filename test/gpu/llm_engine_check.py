"""The LLM engine's attention paths on one device and dtype: the rectangle batch cache, the paged
cache on the engine's fast forward, and the paged cache behind Hugging Face's forward (with a
pool small enough to preempt, and prompts sharing a prefix), each against ``generate``.

    python test/gpu/llm_engine_check.py --device cuda --dtype bfloat16 [--model toy|realistic]

``--model``: ``toy`` (the tests' tiny Llama, the default) or ``realistic`` (benchmarks/llm_shapes.py:
hidden 1024, 16 layers, 16 heads with 8 KV heads, weights at scale 0.02). The realistic model's
logits are nearly flat (random weights at 0.02), so there even float32 is judged by the margin rule
below rather than token equality.

float32: every token must equal ``generate``'s (the tests' rule). In half precision each layout
rounds differently, so a greedy argmax between two near-equal logits may flip and the sequence then
diverges from ``generate``'s: there each path's own sequence is scored again by the model's forward
over the whole text, and every token it picked must be the argmax there up to rounding (its logit
within 2 % of the largest logit's magnitude of the best one). Prints one line per path; exits 1 on
a failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

PROMPTS = ["Hello", "The quick brown fox jumps over the lazy dog and then", "a",
           "Once upon a time there was a little robot who loved to count stars", "count: one, two",
           "Streaming sends every token to the client as soon as it is produced. The cache keeps"]


def _worst_margin(model, prompt: list[int], generated: list[int], device: str) -> float:
    """The largest (best logit - picked token's logit) / |best logit| over the generated tokens,
    the whole text scored in one forward."""
    import torch

    with torch.inference_mode():
        full = torch.tensor([prompt + generated], device=device)
        logits = model(input_ids=full).logits[0, len(prompt) - 1:-1].float()
    picked = logits.gather(1, torch.tensor(generated, device=device).unsqueeze(1)).squeeze(1)
    best = logits.max(dim=1).values
    return float(((best - picked) / best.abs().clamp_min(1e-6)).max())


def main() -> int:
    import torch

    from ts.llm.engine.generation import GenerationEngine
    from ts.llm.engine.paged.scheduler import PagedKV, paged_engine
    from ts.llm.params import SamplingParams
    from ts.testing.tiny_llm import build_model, build_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--model", default="toy", choices=["toy", "realistic"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype)
    tok = build_tokenizer()
    if args.model == "realistic":
        from benchmarks.llm_shapes import SHAPES, build_llama

        model = build_llama(tok, SHAPES["realistic"]).to(device=args.device, dtype=dtype)
    else:
        model = build_model(tok).to(device=args.device, dtype=dtype)
    ids = [tok(p)["input_ids"] for p in PROMPTS]
    ids.append(ids[-1] + tok(" and more", add_special_tokens=False)["input_ids"])  # a cached prefix
    n = args.new_tokens
    refs = []
    for x in ids:
        out = model.generate(torch.tensor([x], device=args.device), attention_mask=torch.ones(1, len(x), dtype=torch.long,
                             device=args.device), do_sample=False, max_new_tokens=n)
        refs.append(out[0, len(x):].tolist())
    engines = {
        "rectangle cache, fast forward": GenerationEngine(model, tok, max_batch_size=4),
        "paged cache, fast forward": paged_engine(model, tok, max_batch_size=4, block_size=4, num_blocks=20),
        "paged cache, HF forward": paged_engine(model, tok, max_batch_size=4, block_size=4, num_blocks=20,
                                              fast_path=False),
    }
    # the pool sized from a memory budget (kv_cache_memory_fraction): the blocks the arithmetic
    # promises must take the bytes it says once the storage exists
    from ts.llm.engine.paged.budget import available_bytes, blocks_in_budget, bytes_per_block

    per_block = bytes_per_block(model.config, model.config.num_hidden_layers, 4, dtype)
    free = available_bytes(torch.device(args.device))
    budget_blocks = min(blocks_in_budget(0.001, free, per_block), 4096)
    engines["paged cache, pool from kv_cache_memory_fraction"] = paged_engine(
        model, tok, max_batch_size=4, block_size=4, num_blocks=budget_blocks)
    failed = False
    for name, engine in engines.items():
        batch = [(f"s{i}", x, SamplingParams(max_new_tokens=n, ignore_eos=True)) for i, x in enumerate(ids)]
        results = engine.generate_all(batch)
        got = [results[f"s{i}"].token_ids for i in range(len(ids))]
        same = sum(a == b for g, r in zip(got, refs, strict=True) for a, b in zip(g, r, strict=False))
        share = same / sum(len(r) for r in refs)
        worst = max(_worst_margin(model, x, g, args.device) for x, g in zip(ids, got, strict=True))
        ok = got == refs if dtype == torch.float32 and args.model == "toy" else worst <= 0.02
        extra = ""
        if isinstance(engine.kv, PagedKV):
            extra = f", {engine.kv.preemptions} preemptions, prefix hit rate {engine.kv.prefix_stats.hit_rate:.2f}"
        if name.endswith("kv_cache_memory_fraction"):
            held = sum(t.nbytes for t in engine.kv.storage.keys + engine.kv.storage.values)
            ok &= held == budget_blocks * per_block
            extra += (f"; {budget_blocks} blocks of {per_block} B from 0.001 of {free} B free: storage holds "
                      f"{held} B")
        print(f"{'ok  ' if ok else 'FAIL'} {name}, {args.model} model on {args.device} {args.dtype}: {share:.1%} of tokens equal "
              f"generate's, worst argmax margin {worst:.4f}{extra}")
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
