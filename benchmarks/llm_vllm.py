"""tserve beside vLLM's CPU backend: the same model folder, prompts and load, cell by cell.

    bash benchmarks/run.sh --only llm                       # after the TorchServe comparison
    bash benchmarks/run.sh --only llm-vllm --llm-models realistic --llm-dtypes bfloat16

For each model (``llm_shapes.py``: the toy and the realistic Llama) and dtype (float32, bfloat16;
set explicitly on both servers: vLLM's ``--dtype auto`` would serve float32 weights as bfloat16),
tserve (its LLM handler, the paged KV cache with prefix caching, blocks of 32) and ``vllm serve``
(``vllm_server.py``) run at once with the same limits: 32 running sequences, 512 tokens a step,
blocks of 32 (vLLM's CPU attention needs a multiple of 32), the model's context, one compute
thread each. Both are asked through OpenAI's ``/v1/completions`` with ``logprobs: 0``, greedy,
``ignore_eos`` (every answer has the tokens it asked for).

Before the load: each server answers the probe prompts one at a time and then all at once; the
answers' tokens (``logprobs.tokens``) are compared token by token -- between the servers (in
float32 they should be identical; in bfloat16 rounding differs between the two kernels, so the
agreement before the first divergence is reported) and within each server (self-consistency: the
same tokens alone and batched).

Load: closed loop, streamed, at c1, c8, c32 over ``llm.py``'s prompts and on a shared prefix (the
same preamble before each prompt: prefix caching) at c8 and c32; each cell in halves A B B A
(reversed every cell). Measured: tokens/s, TTFT p99, the gap between chunks (TPOT) p50, and tokens
per second of the server's CPU time (every process of each server's tree: tserve's frontend,
worker and engine; vLLM's API server and engine core).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import statistics
from pathlib import Path
from typing import Any

from benchmarks import llm, loadgen, models, procstat
from benchmarks.llm_shapes import SHAPES, model_folder, parameters
from benchmarks.servers import REPO, Server, ServerError, ServerKind
from benchmarks.vllm_server import VllmServer, unavailable

MAX_SEQS, STEP_TOKENS, BLOCK = 32, 512, 32
CELLS = (("c1", 1, False), ("c8", 8, False), ("c32", 32, False), ("prefix c8", 8, True), ("prefix c32", 32, True))
PROBES = 8
WARMUP_S = 6.0
TSERVE_DELAY_MS = 5
DTYPES = ("float32", "bfloat16")
SERVERS = ("tserve", "vllm")


def tserve_config(dtype: str, context: int) -> str:
    return (f"minWorkers: 1\nmaxWorkers: 1\nbatchSize: {MAX_SEQS}\nmaxBatchDelay: {TSERVE_DELAY_MS}\n"
            "responseTimeout: 600\ncontinuousBatching: true\nhandler:\n"
            f"  dtype: {dtype}\n  max_context: {context}\n  max_batch_size: {MAX_SEQS}\n"
            f"  max_tokens_per_step: {STEP_TOKENS}\n  paged_kv_cache: true\n  enable_prefix_caching: true\n"
            f"  block_size: {BLOCK}\n")


def completion_body(name: str, stream: bool) -> Any:
    """OpenAI completions for ``name``: ``(prompt, max_tokens, stream) -> body``."""
    def body(prompt: str, n: int, streamed: bool = stream) -> bytes:
        return json.dumps({"model": name, "prompt": prompt, "max_tokens": n, "temperature": 0,
                           "ignore_eos": True, "stream": streamed, "logprobs": 0}).encode()
    return body


def shared_prefix_work(work: list[tuple[str, int]], words: int) -> list[tuple[str, int]]:
    """``work``'s prompts after one common preamble of ``words`` words of the corpus."""
    from ts.testing.tiny_llm import CORPUS

    corpus = CORPUS.split()
    preamble = " ".join(corpus[i % len(corpus)] for i in range(words))
    return [(f"{preamble} {prompt}", n) for prompt, n in work]


# ---------------------------------------------------------------------------- token comparison

async def _post(port: int, body: bytes) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(loadgen.build_request("127.0.0.1", port, "/v1/completions", body, "application/json"))
        status, _, data = await llm._read_reply(reader)
    finally:
        writer.close()
    if status != 200:
        raise ServerError(f"HTTP {status} from 127.0.0.1:{port}: {data[:300]!r}")
    doc: dict[str, Any] = json.loads(data)
    return doc


PARTIAL = "<part of a UTF-8 character>"


def _tokens(doc: dict[str, Any]) -> list[str]:
    """The answer's tokens as ``logprobs.tokens`` spells them, then its text. A token that is part
    of a UTF-8 character is spelled differently by the two (vLLM: ``""``; tserve, decoding it alone
    as Hugging Face does: ``"\ufffd"``): both become ``PARTIAL``, and the whole text (exact) is
    compared as the last entry."""
    choice = doc["choices"][0]
    tokens = [PARTIAL if (t == "" or "\ufffd" in t) else t for t in choice["logprobs"]["tokens"]]
    return [*tokens, f"text: {choice['text']}"]


async def answers(port: int, name: str, work: list[tuple[str, int]], together: bool) -> list[list[str]]:
    """Each prompt's greedy tokens, asked one at a time or all at once."""
    body = completion_body(name, False)
    if together:
        docs = await asyncio.gather(*(_post(port, body(p, n)) for p, n in work))
    else:
        docs = [await _post(port, body(p, n)) for p, n in work]
    for doc, (_, n) in zip(docs, work, strict=True):
        if doc.get("usage", {}).get("completion_tokens") != n:
            raise ServerError(f"asked for {n} tokens with ignore_eos, got usage {doc.get('usage')}")
    return [_tokens(d) for d in docs]


def agreement(a: list[list[str]], b: list[list[str]]) -> dict[str, Any]:
    """Answers equal token for token, the share of tokens before each pair's first divergence,
    and the first pair that diverges (a few tokens either side of where)."""
    before, example = [], None
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        same = next((i for i, (s, t) in enumerate(zip(x, y, strict=False)) if s != t), min(len(x), len(y)))
        before.append(same / max(len(x), 1))
        if example is None and x != y:
            example = {"prompt": k, "at": same, "a": x[max(0, same - 3):same + 3], "b": y[max(0, same - 3):same + 3]}
    return {"identical": sum(x == y for x, y in zip(a, b, strict=True)), "of": len(a),
            "before_first_divergence": round(statistics.mean(before), 3),
            "first_divergence_min": round(min(before), 3), "first_divergence": example}


def compare(ports: dict[str, int], name: str, work: list[tuple[str, int]]) -> dict[str, Any]:
    alone = {s: asyncio.run(answers(port, name, work, False)) for s, port in ports.items()}
    batched = {s: asyncio.run(answers(port, name, work, True)) for s, port in ports.items()}
    return {"tserve_vs_vllm": agreement(alone["tserve"], alone["vllm"]),
            "self_consistency": {s: agreement(alone[s], batched[s]) for s in ports}}


# ---------------------------------------------------------------------------- the load

def measure(port: int, cpu: Any, name: str, work: list[tuple[str, int]], concurrency: int,
            duration_s: float) -> llm.Run:
    """One closed-loop half: the server's CPU seconds over it in ``cpu_s`` (not the client's)."""
    before = cpu()
    run = asyncio.run(llm.closed_loop(port, work, concurrency, duration_s, True, path="/v1/completions",
                                      body=completion_body(name, True)))
    run.cpu_s = cpu() - before
    return run


def cell_summary(run: llm.Run) -> dict[str, Any]:
    """``llm.summarize`` with the server's tokens per CPU-second and TPOT: each answer's time from
    its first chunk to its end over its tokens after the first (a server that sends several tokens'
    events in one burst has near-zero gaps between chunks, so the chunk gaps are not its TPOT)."""
    out = llm.summarize(run.replies, run.elapsed, run.errors)
    tpot = [(r.done - r.chunks[0]) * 1000 / (r.tokens - 1) for r in run.replies if r.chunks and r.tokens > 1]
    out["tpot_p50_ms"] = round(statistics.median(tpot), 2) if tpot else None
    out["server_cpu_s"] = round(run.cpu_s, 2)
    out["tokens_per_cpu_s"] = round(out["tokens"] / run.cpu_s, 1) if run.cpu_s > 0 else None
    return out


def ratios(cells: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """tserve / vLLM per cell."""
    out = {}
    for cell in cells.get("tserve", {}):
        a, b = cells["tserve"][cell], cells.get("vllm", {}).get(cell, {})
        out[cell] = {k: (round(a[k] / b[k], 3) if a.get(k) and b.get(k) else None)
                     for k in ("tokens_per_s", "ttft_p99_ms", "tpot_p50_ms", "tokens_per_cpu_s")}
    return out


def table(model: str, dtype: str, cells: dict[str, dict[str, Any]]) -> list[str]:
    r = ratios(cells)
    lines = [f"  {model} {dtype}: cell | tok/s tserve / vLLM (ratio) | TTFT p99 ms (ratio) | TPOT p50 ms | "
             "tokens per server CPU-s (ratio)"]
    for cell, ratio in r.items():
        a, b = cells["tserve"][cell], cells["vllm"][cell]
        lines.append(f"    {cell:10s} | {a['tokens_per_s']} / {b['tokens_per_s']} ({ratio['tokens_per_s']}) | "
                     f"{a['ttft_p99_ms']} / {b['ttft_p99_ms']} ({ratio['ttft_p99_ms']}) | "
                     f"{a['tpot_p50_ms']} / {b['tpot_p50_ms']} | {a['tokens_per_cpu_s']} / {b['tokens_per_cpu_s']} "
                     f"({ratio['tokens_per_cpu_s']}) | errors {a['errors']}/{b['errors']}")
    return lines


def run_one(kind: ServerKind, store: Path, work_dir: Path, model: str, dtype: str, duration_s: float,
            cells: tuple[tuple[str, int, bool], ...] = CELLS) -> dict[str, Any]:
    """Both servers on one model and dtype: the token comparison, then the cells."""
    shape = SHAPES[model]
    folder = model_folder(work_dir, model)
    archive = f"llm-{model}-{dtype}"
    models.build_tserve(models.ModelSpec(archive, str(REPO / "examples" / "llm" / "handler.py"),
                                         extra_files=[str(folder)], config_yaml=tserve_config(dtype, shape.context)),
                        store)
    plain = llm.prompt_list()
    shared = shared_prefix_work(plain, shape.shared_prefix_words)
    llm.check_room(llm.prompt_tokens(folder, shared), shape.context)
    tserve = Server(dataclasses.replace(kind, env={**kind.env, **llm.THREAD_ENV}), store)
    vllm = VllmServer(folder, archive, dtype, shape.context, MAX_SEQS, STEP_TOKENS, BLOCK, tserve.dir)
    out: dict[str, Any] = {"model": model, "dtype": dtype, "shape": shape.__dict__,
                           "parameters": parameters(shape, 600)}
    try:
        tserve.start()
        tserve.wait_ready()
        tserve.register(f"{archive}.mar", archive, batch_size=MAX_SEQS, delay_ms=TSERVE_DELAY_MS, timeout=600)
        out["vllm_start_s"] = round(vllm.start(), 1)
        ports = {"tserve": tserve.inference_port, "vllm": vllm.port}
        cpu = {"tserve": lambda: procstat.tree_cpu_s(tserve.pid), "vllm": vllm.cpu_s}
        out["tokens"] = compare(ports, archive, plain[:PROBES])
        print(f"  {model} {dtype} tokens: {out['tokens']}", flush=True)
        for s in SERVERS:  # warm-up
            asyncio.run(llm.closed_loop(ports[s], plain, 8, WARMUP_S, True, path="/v1/completions",
                                        body=completion_body(archive, True)))
        results: dict[str, dict[str, Any]] = {s: {} for s in SERVERS}
        for i, (cell, conc, prefixed) in enumerate(cells):
            work = shared if prefixed else plain
            runs = {s: llm.Run() for s in SERVERS}
            there = list(SERVERS) if i % 2 == 0 else list(SERVERS)[::-1]
            for s in there + there[::-1]:
                runs[s].add(measure(ports[s], cpu[s], archive, work, conc, duration_s / 2))
            for s in SERVERS:
                results[s][cell] = {**cell_summary(runs[s]), "loadavg_1m": round(os.getloadavg()[0], 2)}
            a, b = results["tserve"][cell], results["vllm"][cell]  # the whole line: a cut-short run keeps it
            print(f"  {model} {dtype} {cell}: tok/s tserve {a['tokens_per_s']} / vLLM {b['tokens_per_s']}, TTFT p99 "
                  f"{a['ttft_p99_ms']} / {b['ttft_p99_ms']} ms, TPOT p50 {a['tpot_p50_ms']} / {b['tpot_p50_ms']} ms, "
                  f"tokens per server CPU-s {a['tokens_per_cpu_s']} / {b['tokens_per_cpu_s']}, requests "
                  f"{a['requests']} / {b['requests']}, errors {a['errors']} / {b['errors']}, load {a['loadavg_1m']}",
                  flush=True)
        out["servers"] = results
        out["ratios"] = ratios(results)
        print("\n".join(table(model, dtype, results)), flush=True)
    finally:
        vllm.stop()
        tserve.stop()
    return out


def run(kinds: dict[str, ServerKind], ts_store: Path, work_dir: Path, duration_s: float,
        model_names: list[str], dtypes: list[str], cell_names: list[str] | None = None) -> dict[str, Any]:
    """Every chosen model and dtype, one after the other; vLLM skipped with the reason when it
    cannot run here."""
    why = unavailable()
    if why is not None:
        print(f"  vLLM skipped: {why}", flush=True)
        return {"skipped": why}
    cells = tuple(c for c in CELLS if cell_names is None or c[0].replace(" ", "-") in cell_names)
    out: dict[str, Any] = {"settings": {"max_seqs": MAX_SEQS, "step_tokens": STEP_TOKENS, "block_size": BLOCK,
                                        "threads": 1, "duration_s": duration_s}, "runs": []}
    for model in model_names:
        for dtype in dtypes:
            try:
                out["runs"].append(run_one(kinds["tserve"], ts_store, work_dir, model, dtype, duration_s, cells))
            except (ServerError, loadgen.LoadError, ValueError) as exc:
                print(f"  {model} {dtype} FAILED: {exc}", flush=True)
                out["runs"].append({"model": model, "dtype": dtype, "error": str(exc)})
    return out


def tokens_line(tokens: dict[str, Any]) -> str:
    """``compare``'s result in words."""
    def said(a: dict[str, Any]) -> str:
        return (f"{a['identical']} of {a['of']} answers identical, {a['before_first_divergence']:.0%} of tokens "
                f"before the first divergence")

    own = tokens["self_consistency"]
    return (f"Greedy tokens: tserve against vLLM {said(tokens['tserve_vs_vllm'])}; each server alone against all "
            f"prompts at once: tserve {said(own['tserve'])}, vLLM {said(own['vllm'])}.")


def report_lines(section: dict[str, Any] | None) -> list[str]:
    """The markdown tables of ``results["llm_vllm"]`` (report.py)."""
    if not section:
        return []
    if "skipped" in section:
        return [f"LLM beside vLLM: skipped ({section['skipped']})", ""]
    st = section["settings"]
    lines = ["## LLM: tserve beside vLLM's CPU backend (benchmarks/llm_vllm.py)", "",
             f"Both servers: {st['max_seqs']} running sequences, {st['step_tokens']} tokens a step, blocks of "
             f"{st['block_size']}, prefix caching, {st['threads']} compute thread; closed-loop streamed "
             f"completions, {st['duration_s']:g} s a cell in halves A B B A.", ""]
    for one in section["runs"]:
        title = f"### {one['model']} {one['dtype']}"
        if "error" in one:
            lines += [title, "", f"FAILED: {' '.join(one['error'].split())[:300]}", ""]
            continue
        lines += [title, "", tokens_line(one["tokens"]), "",
                  "| cell | tserve tok/s | vLLM tok/s | tserve / vLLM | TTFT p99 ms tserve / vLLM | "
                  "TPOT p50 ms tserve / vLLM | tok per CPU-s tserve / vLLM |", "|---|---|---|---|---|---|---|"]
        for cell, r in one["ratios"].items():
            a, b = one["servers"]["tserve"][cell], one["servers"]["vllm"][cell]
            lines.append(f"| {cell} | {a['tokens_per_s']} | {b['tokens_per_s']} | {r['tokens_per_s']} | "
                         f"{a['ttft_p99_ms']} / {b['ttft_p99_ms']} ({r['ttft_p99_ms']}) | "
                         f"{a['tpot_p50_ms']} / {b['tpot_p50_ms']} | {a['tokens_per_cpu_s']} / {b['tokens_per_cpu_s']} "
                         f"({r['tokens_per_cpu_s']}) |")
        lines.append("")
    return lines
