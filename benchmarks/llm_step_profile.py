"""Where a step of the paged engine goes, on the benchmark's models: ``torch.profiler`` over steps
of the paged engine (``paged_engine``) in this process (one thread), grouped into matmuls, decode attention (the
native kernel), prompt attention (SDPA and the block gather), dtype conversions and the rest.

    .venv/bin/python -m benchmarks.llm_step_profile [--model realistic] [--dtype bfloat16] [--rows 32]

``--rows`` sequences run (their prompts are ``llm.py``'s, 64 tokens asked each, ``ignore_eos``),
with ``--waiting`` more queued so that steps mix decode rows and a prompt chunk as under load;
after ``--warmup`` steps, ``--steps`` steps are profiled. Each line: the group's share of the
profiled steps' CPU time. The engine code comes from ``PYTHONPATH``: the same script profiles
another tree's engine (an exported older commit, for a before/after).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "mkldnn::_linear_pointwise", "mkl::_mkl_linear")
PROMPT_ATTENTION = ("scaled_dot_product", "flash_attention", "aten::index_select")
CONVERSIONS = ("aten::_to_copy", "aten::copy_")
DECODE = "decode attention (native)"


def group(name: str) -> str:
    if name == DECODE:
        return "decode attention (native kernel)"
    if name in MATMUL:
        return "matmuls"
    if any(k in name for k in PROMPT_ATTENTION):
        return "prompt attention (SDPA, block gather)"
    if name in CONVERSIONS:
        return "dtype conversions, copies"
    return "norms, rotary, SiLU, sampling, other ops"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="realistic")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--waiting", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=12)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--work", default=".bench/work")
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchmarks.llm import prompt_list
    from benchmarks.llm_shapes import SHAPES, model_folder
    from ts.llm.engine.paged import native
    from ts.llm.engine.paged.scheduler import paged_engine
    from ts.llm.params import SamplingParams

    torch.set_num_threads(1)
    folder = model_folder(Path(args.work), args.model)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, args.dtype)).eval()
    call = native.DecodeKernel.__call__

    def traced(self: Any, *a: Any) -> Any:
        with record_function(DECODE):
            return call(self, *a)

    native.DecodeKernel.__call__ = traced  # type: ignore[method-assign]
    engine = paged_engine(model, tok, max_batch_size=args.rows, max_tokens_per_step=512,
                          max_context=SHAPES[args.model].context, block_size=32)
    engine.detokenize = False
    work = prompt_list()
    for i in range(args.rows + args.waiting):
        prompt, _ = work[i % len(work)]
        engine.add(f"r{i}", tok(prompt)["input_ids"], SamplingParams(max_new_tokens=64, ignore_eos=True,
                                                                      temperature=0))
    with torch.inference_mode():
        for _ in range(args.warmup):
            engine.step()
        started = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            rows = 0
            for _ in range(args.steps):
                engine.step()
                rows += engine.last_step.decode_tokens
        wall = time.perf_counter() - started
    shares: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        shares[group(event.key)] += event.self_cpu_time_total
    total = sum(shares.values())
    print(f"{args.model} {args.dtype}: {args.steps} steps, {rows / args.steps:.1f} decode rows a step, "
          f"{wall / args.steps * 1000:.0f} ms a step (under the profiler); linear form: "
          f"{getattr(engine.runner.fast_forward, 'linear_form', 'F.linear')}")
    for name, t in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {name:42s} {100 * t / total:5.1f} %")


if __name__ == "__main__":
    main()
