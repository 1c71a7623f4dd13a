"""LLM serving: tserve's continuous batching against TorchServe 0.12's batch-and-``generate``.

    bash benchmarks/run.sh --only llm --duration 10

One model for both: the tiny Llama of ``ts/testing/tiny_llm.py`` made bigger (hidden 256, 4 layers,
seeded weights, the same locally trained tokenizer), saved once with ``save_pretrained`` and
archived twice, so both servers load the identical files. tserve serves it with its built-in
LLM handler (``examples/llm/handler.py`` and ``model-config.yaml``: ``continuousBatching``,
registered with ``batchSize`` 32 running sequences, tokens streamed) twice: ``tserve`` with the
rectangle batch cache (``handler.paged_kv_cache: false``) and ``tserve-paged`` with the paged KV
cache (``true``, prefix caching on: what this model gets by default on a CPU); TorchServe
with ``handlers/llm_generate_handler.py`` (batch 8,
``maxBatchDelay`` 50 ms, left padding, one greedy ``generate`` per batch, nothing streamed).

Load: a fixed, seeded list of prompts of mixed length with ``max_new_tokens`` 16-64, requested
with ``ignore_eos`` (so every answer has exactly the tokens it asked for), closed loop at
concurrency 1, 8 and 32, the three servers cell by cell, the order reversed every cell. Measured:
generated tokens/s, time to first token (tserve: its first streamed chunk; TorchServe: the whole
answer) and the gaps between chunks (inter-token latency, tserve only). The model's own bound:
a bare loop of the model's forward at tserve's running batch (8 at c8, 32 at c32) with the
engine's KV cache layout (prefill, then 40 timed decode steps), no server, in a child process,
measured just before each of tserve's runs at c8 and c32. tserve's decode rate: its tokens after
each first one over the time its worker did not spend prefilling (the ``prefill`` stage of
describe).
Every worker and the bound run with one torch thread (``OMP_NUM_THREADS=1``): two threads on a
loaded 2-core machine made a forward ~50x slower in trials.

The bound's loop is ``llm_bound.py``. This file stays one (past 400 lines): its pure parts, load
client and scenario share the ``Reply``/``Run`` records and the settings above, and split further
one scenario would be read across four files.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import itertools
import json
import os
import random
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import loadgen, models, procstat
from benchmarks.servers import REPO, Server, ServerError, ServerKind

NAME = "llm"
PEER = "torchserve-quiet"
HIDDEN, LAYERS, SEED = 256, 4, 0
BATCH = 8          # TorchServe's batch (the stock batch-and-generate handler)
TSERVE_BATCH = 32  # tserve's running sequences (max_batch_size): continuous batching's own knob
TSERVE_DELAY_MS, PEER_DELAY_MS = 5, 50
THREADS = 1
# Load before the first cell, per server (c32): 24 requests left the frontends' request path in the
# JVM's interpreter for the c1 and c8 cells (measured: a request's trip between the client and the
# worker took 3.5 ms at c1 after 100 requests, 1.9 ms after 1300); a server in production is warm.
WARMUP_S = 8.0
CONCURRENCY = (1, 8, 32)
NEW_TOKENS = (16, 64)
PROMPT_WORDS = (1, 48)
N_PROMPTS = 64
TSERVE_CONFIG = REPO / "examples" / "llm" / "model-config.yaml"
PAGED = "tserve-paged"
# Each variant names its cache in the same model-config (the paged one is the default on a CPU, so
# the rectangle is asked for): the paged pool's default size holds max_batch_size whole contexts, so
# nothing is preempted and the two engines do equal work.
PAGED_KEYS = "  paged_kv_cache: true\n  enable_prefix_caching: true\n"
RECTANGLE_KEYS = "  paged_kv_cache: false\n"
TSERVE_HANDLER = REPO / "examples" / "llm" / "handler.py"
PEER_CONFIG = (f"minWorkers: 1\nmaxWorkers: 1\nbatchSize: {BATCH}\n"
               f"maxBatchDelay: {PEER_DELAY_MS}\nresponseTimeout: 300\n")
THREAD_ENV = {"OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS),
              "TOKENIZERS_PARALLELISM": "false"}
# Targets from issue 15 (ratios tserve / TorchServe, and tserve / the model's bound).
TOKENS_TARGET, TTFT_TARGET, BOUND_TARGET = 3.0, 0.3, 0.8
PAGED_BOUND_TARGET = 0.9  # issue 29: the paged cache's decode reads only each row's real tokens
INCONCLUSIVE = 1.05  # a fraction of the bound above this says the bound was measured too low


# ---------------------------------------------------------------------------- the pure parts

def prompt_list(n: int = N_PROMPTS, seed: int = SEED) -> list[tuple[str, int]]:
    """``n`` (prompt, max_new_tokens) pairs: runs of 1-48 words of the tokenizer's corpus."""
    from ts.testing.tiny_llm import CORPUS

    words = CORPUS.split()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k, start = rng.randint(*PROMPT_WORDS), rng.randrange(len(words))
        prompt = " ".join(words[(start + i) % len(words)] for i in range(k))
        out.append((prompt, rng.randint(*NEW_TOKENS)))
    return out


def request_body(prompt: str, max_new_tokens: int, stream: bool) -> bytes:
    return json.dumps({"prompt": prompt, "max_new_tokens": max_new_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": stream}).encode()


def count_tokens(body: bytes, requested: int) -> int:
    """Generated tokens of one answer: ``usage.completion_tokens`` of a JSON answer; a raw text
    stream (which carries no usage) was asked for ``ignore_eos`` within the context, so it has
    exactly ``requested`` (checked against the JSON answers before the load, see ``probe``)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return requested
    usage = doc.get("usage") if isinstance(doc, dict) else None
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return usage["completion_tokens"]
    return requested


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (as the load generator's); None when there are no values."""
    if not values:
        return None
    return loadgen.LoadResult(len(values), 0, 1.0, list(values)).percentile(q)


def gaps(times: list[float]) -> list[float]:
    """Time between consecutive chunk arrivals of one answer."""
    return [b - a for a, b in itertools.pairwise(times)]


@dataclass
class Reply:
    sent: float
    done: float
    tokens: int
    chunks: list[float] = field(default_factory=list)  # arrival of each chunk (streamed answers)

    @property
    def ttft(self) -> float:
        """To the first streamed chunk; to the whole answer when nothing is streamed."""
        return (self.chunks[0] if self.chunks else self.done) - self.sent


def summarize(replies: list[Reply], elapsed: float, errors: list[str]) -> dict[str, Any]:
    tokens = sum(r.tokens for r in replies)
    ttft = [r.ttft * 1000 for r in replies]
    itl = [g * 1000 for r in replies for g in gaps(r.chunks)]
    chunks = sum(len(r.chunks) for r in replies)

    def ms(v: float | None) -> float | None:
        return None if v is None else round(v, 2)

    out: dict[str, Any] = {
        "requests": len(replies), "errors": len(errors), "duration_s": round(elapsed, 3),
        "tokens": tokens, "tokens_per_s": round(tokens / elapsed, 1) if elapsed > 0 else 0.0,
        "ttft_p50_ms": ms(percentile(ttft, 50)), "ttft_p99_ms": ms(percentile(ttft, 99)),
        "itl_p50_ms": ms(percentile(itl, 50)), "itl_p99_ms": ms(percentile(itl, 99)),
        "latency_p50_ms": ms(percentile([(r.done - r.sent) * 1000 for r in replies], 50)),
        "chunks_per_token": round(chunks / tokens, 3) if chunks and tokens else None,
    }
    if errors:
        out["first_error"] = errors[0][:300]
    return out


def verdict(cells: dict[str, dict[str, Any]], bounds: dict[str, float],
            server: str = "tserve", bound_target: float = BOUND_TARGET) -> dict[str, Any]:
    """Ratios ``server`` (a tserve variant) / TorchServe per cell, its tokens/s as a fraction of
    the model's bound measured beside it (``bounds``: cell -> tokens/s), and each target met or not."""
    ts, peer = cells.get(server, {}), cells.get(PEER, {})
    ratios: dict[str, dict[str, float | None]] = {}
    for cell in (f"c{c}" for c in CONCURRENCY):
        a, b = ts.get(cell) or {}, peer.get(cell) or {}
        ratios[cell] = {key: (round(a[key] / b[key], 3) if a.get(key) and b.get(key) else None)
                        for key in ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms")}
    bound = {cell: (round((ts.get(cell) or {}).get("tokens_per_s", 0) / bounds[cell], 3)
                    if bounds.get(cell) else None) for cell in ("c8", "c32")}
    decode = {cell: (round((ts.get(cell) or {}).get("decode_tokens_per_s", 0) / bounds[cell], 3)
                     if bounds.get(cell) and (ts.get(cell) or {}).get("decode_tokens_per_s") else None)
              for cell in ("c8", "c32")}
    targets = []
    for cell in ("c8", "c32"):
        r = ratios[cell]["tokens_per_s"]
        targets.append({"what": f"tokens/s {cell}", "value": r, "target": f">= {TOKENS_TARGET}",
                        "met": r is not None and r >= TOKENS_TARGET})
    for cell in ratios:
        r = ratios[cell]["ttft_p99_ms"]
        targets.append({"what": f"TTFT p99 {cell}", "value": r, "target": f"<= {TTFT_TARGET}",
                        "met": r is not None and r <= TTFT_TARGET})
    # Above 1 the bound cannot be one: the machine's load moved between the two measurements.
    for cell, frac in decode.items():
        targets.append({"what": f"decode (time not prefilling) / bound {cell}", "value": frac,
                        "target": f">= {bound_target}",
                        "met": None if frac is not None and frac > INCONCLUSIVE else
                        frac is not None and frac >= bound_target})
    return {"ratios": ratios, "bound_fraction": bound, "decode_fraction": decode, "targets": targets}


# ---------------------------------------------------------------------------- the client

async def _read_reply(reader: asyncio.StreamReader) -> tuple[int, list[float], bytes]:
    """(status, arrival time of each chunk of a chunked body, body) of one HTTP/1.1 response."""
    head = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
    status = int(head[0].split(b" ", 2)[1])
    headers = {}
    for line in head[1:]:
        key, _, value = line.partition(b":")
        headers[key.strip().lower()] = value.strip()
    if b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
        return status, [], await reader.readexactly(int(headers.get(b"content-length", b"0")))
    times, parts = [], []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # the empty line after the last chunk (no trailers)
            return status, times, b"".join(parts)
        data = await reader.readexactly(size + 2)
        times.append(time.perf_counter())
        parts.append(data[:-2])


@dataclass
class Run:
    """What closed-loop runs measured (several runs of one cell add up)."""

    replies: list[Reply] = field(default_factory=list)
    elapsed: float = 0.0
    errors: list[str] = field(default_factory=list)
    cpu_s: float = 0.0
    prefill_s: float | None = None  # the worker's time in prefill (tserve: its describe stages)

    def add(self, other: Run) -> None:
        self.replies += other.replies
        self.elapsed += other.elapsed
        self.errors += other.errors
        self.cpu_s += other.cpu_s
        if other.prefill_s is not None:
            self.prefill_s = (self.prefill_s or 0.0) + other.prefill_s

    def summary(self) -> dict[str, Any]:
        out = summarize(self.replies, self.elapsed, self.errors)
        out["client_cpu_share"] = round(self.cpu_s / max(self.elapsed, 1e-9), 2)
        if self.prefill_s is not None:
            # decode throughput: the tokens after each first one, over the time not spent prefilling
            decode_tokens = out["tokens"] - out["requests"]
            out["prefill_s"] = round(self.prefill_s, 3)
            out["decode_tokens_per_s"] = round(decode_tokens / max(self.elapsed - self.prefill_s, 1e-9), 1)
        return out


async def closed_loop(port: int, work: list[tuple[str, int]], concurrency: int,
                      duration_s: float, stream: bool, max_requests: int = 10**9,
                      timeout_s: float = 300.0, path: str = f"/predictions/{NAME}",
                      body: Callable[[str, int, bool], bytes] = request_body) -> Run:
    """``concurrency`` keep-alive connections, each sending the next (prompt, max_new_tokens)
    of ``work`` (cycled) when its answer is complete, until ``duration_s`` is over; the
    requests in flight then finish and count (timed to the last answer). ``path`` and ``body``:
    the endpoint and its request (OpenAI's completions for the vLLM comparison, ``llm_vllm.py``)."""
    feed = itertools.cycle(work)
    replies: list[Reply] = []
    errors: list[str] = []
    issued = 0
    start = time.perf_counter()
    deadline = start + duration_s

    async def connection() -> None:
        nonlocal issued
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            raise loadgen.LoadError(f"cannot connect to 127.0.0.1:{port}: {exc}") from None
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while time.perf_counter() < deadline and issued < max_requests:
                issued += 1
                prompt, n = next(feed)
                writer.write(loadgen.build_request("127.0.0.1", port, path,
                                                   body(prompt, n, stream),
                                                   "application/json"))
                sent = time.perf_counter()
                try:
                    status, times, data = await asyncio.wait_for(_read_reply(reader), timeout_s)
                except (OSError, ValueError, asyncio.IncompleteReadError, TimeoutError) as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    return
                if status != 200:
                    errors.append(f"HTTP {status}: {data[:200]!r}")
                    continue
                replies.append(Reply(sent, time.perf_counter(), count_tokens(data, n), times))
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return Run(replies, time.perf_counter() - start, errors)


def measure(port: int, work: list[tuple[str, int]], concurrency: int, duration_s: float,
            stream: bool, management_port: int | None = None) -> Run:
    """One closed-loop run; with ``management_port`` (tserve) also the worker's prefill time."""
    p0 = prefill_busy_s(management_port) if management_port else None
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    run = asyncio.run(closed_loop(port, work, concurrency, duration_s, stream))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    run.cpu_s = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    if p0 is not None and management_port:
        run.prefill_s = prefill_busy_s(management_port) - p0
    return run


def prefill_busy_s(management_port: int) -> float:
    """Seconds tserve's LLM worker has spent prefilling (its ``prefill`` stage in describe)."""
    conn = http.client.HTTPConnection("127.0.0.1", management_port, timeout=60)
    try:
        conn.request("GET", f"/models/{NAME}")
        doc = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    workers = doc[0].get("workers", [])
    return sum(w.get("stages", {}).get("prefill", {}).get("busyMs", 0.0) for w in workers) / 1000


def post(port: int, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", f"/predictions/{NAME}", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


# ---------------------------------------------------------------------------- the model

def build_model_dir(work: Path) -> Path:
    """The benchmark's model and tokenizer, saved once for both servers' archives."""
    from ts.testing.tiny_llm import build_model, build_tokenizer

    folder = work / "llm-model"
    tokenizer = build_tokenizer()
    build_model(tokenizer, seed=SEED, hidden_size=HIDDEN, num_layers=LAYERS).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def cache_config(config: str, paged: bool) -> str:
    """``config`` (a model-config.yaml with a ``handler:`` block) with the paged cache's keys, or
    the rectangle's."""
    if "\nhandler:\n" not in config:
        raise ValueError("the LLM model-config has no handler: block for the KV cache's keys")
    return config.replace("\nhandler:\n", "\nhandler:\n" + (PAGED_KEYS if paged else RECTANGLE_KEYS), 1)


def archive_name(server: str) -> str:
    return f"{NAME}-paged" if server == PAGED else NAME


def build_archives(work: Path, ts_store: Path, peer_store: Path, archiver: Path) -> Path:
    folder = build_model_dir(work)
    config = TSERVE_CONFIG.read_text()
    for server, yaml in (("tserve", cache_config(config, False)), (PAGED, cache_config(config, True))):
        models.build_tserve(models.ModelSpec(archive_name(server), str(TSERVE_HANDLER),
                                             extra_files=[str(folder)], config_yaml=yaml), ts_store)
    models.build_torchserve(models.ModelSpec(NAME, str(models.HANDLERS / "llm_generate_handler.py"),
                                             extra_files=[str(folder)], config_yaml=PEER_CONFIG),
                            peer_store, archiver)
    return folder


def check_room(prompt_lengths: list[int], max_context: int) -> None:
    """Every prompt leaves room for the most tokens a request asks for within the served
    ``max_context`` (else the server refuses it and the cell measures errors)."""
    longest = max(prompt_lengths)
    if longest + NEW_TOKENS[1] > max_context:
        raise ValueError(f"a prompt of {longest} tokens leaves no room for {NEW_TOKENS[1]} new ones within "
                         f"max_context {max_context} (examples/llm/model-config.yaml): shorten PROMPT_WORDS")


def prompt_tokens(model_dir: Path, work: list[tuple[str, int]]) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    return [len(tok(p)["input_ids"]) for p, _ in work]


# ---------------------------------------------------------------------------- the scenario

def _worker_threads(srv: Server) -> list[str]:
    """OMP_NUM_THREADS as each worker process of the server sees it."""
    out = []
    for p in procstat.process_tree(srv.pid)[1:]:
        if procstat.is_frontend(p):
            continue
        try:
            env = Path(f"/proc/{p.pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        val = next((e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"OMP_NUM_THREADS=")),
                   "unset")
        out.append(val)
    return out


def probe(running: dict[str, Server], work: list[tuple[str, int]],
          streams: dict[str, bool]) -> dict[str, Any]:
    """Before the load: every server answers the same greedy text with the usage asked for, and
    a streaming server streams exactly that text (so its streams carry the tokens asked for)."""
    texts: dict[str, list[str]] = {}
    tokens_ok = stream_ok = True
    for name, srv in running.items():
        texts[name] = []
        for prompt, n in work:
            status, data = post(srv.inference_port, request_body(prompt, n, False))
            if status != 200:
                raise ServerError(f"{name}: probe answered HTTP {status}: {data[:300]!r}")
            doc = json.loads(data)
            tokens_ok &= doc.get("usage", {}).get("completion_tokens") == n
            texts[name].append(doc.get("text"))
            if streams[name]:
                stream_ok &= post(srv.inference_port, request_body(prompt, n, True)) == (
                    200, doc.get("text", "").encode())
    same = len({tuple(t) for t in texts.values()}) == 1
    return {"same_text": same, "completion_tokens_as_asked": tokens_ok,
            "stream_equals_answer": stream_ok,
            "worker_omp_threads": {name: _worker_threads(srv) for name, srv in running.items()}}


def run(kinds: dict[str, ServerKind], ts_store: Path, peer_store: Path, work_dir: Path,
        archiver: Path, duration_s: float) -> dict[str, Any]:
    """The three servers up at once; each cell runs in halves, A B C C B A (reversed every cell),
    so a drift in the machine's load hits every side of a ratio alike. Before each of the tserve
    variants' halves at c8 and c32 the bare loop measures the model's bound, so the fraction
    compares numbers taken seconds apart."""
    from benchmarks.llm_alone import server_limits  # it imports this module, as llm_bound does
    from benchmarks.llm_bound import BareLoopProcess, bound_batch

    model_dir = build_archives(work_dir, ts_store, peer_store, archiver)
    work = prompt_list()
    lens = prompt_tokens(model_dir, work)
    check_room(lens, server_limits()["max_context"])
    settings = {"model": f"Llama hidden {HIDDEN}, {LAYERS} layers, seed {SEED}",
                "batch": BATCH, "tserve_batch": TSERVE_BATCH, "tserve_max_batch_delay_ms": TSERVE_DELAY_MS,
                "torchserve_max_batch_delay_ms": PEER_DELAY_MS, "threads": THREADS,
                "prompts": len(work), "prompt_tokens": [min(lens), max(lens)],
                "max_new_tokens": list(NEW_TOKENS), "duration_s": duration_s}
    bare = BareLoopProcess(model_dir)
    bound_s = min(duration_s / 4, 2.5)
    bounds: dict[str, list[float]] = {}     # the engine's forward (what the server runs)
    hf_bounds: dict[str, list[float]] = {}  # Hugging Face's forward, for comparison
    alone: dict[str, list[float]] = {}      # the paged engine under the cell's load, no server
    process: dict[str, list[float]] = {}    # the same in its engine process, no frontend or worker
    cells: dict[str, dict[str, Any]] = {"tserve": {}, PAGED: {}, PEER: {}}
    running: dict[str, Server] = {}
    streams = {"tserve": True, PAGED: True, PEER: False}
    delays = {"tserve": TSERVE_DELAY_MS, PAGED: TSERVE_DELAY_MS, PEER: PEER_DELAY_MS}
    batches = {"tserve": TSERVE_BATCH, PAGED: TSERVE_BATCH, PEER: BATCH}
    try:
        for name in cells:
            base = kinds[PEER if name == PEER else "tserve"]
            kind = dataclasses.replace(base, env={**base.env, **THREAD_ENV})
            running[name] = Server(kind, peer_store if name == PEER else ts_store)
            running[name].start()
        for name, srv in running.items():
            srv.wait_ready()
            srv.register(f"{archive_name(name)}.mar", NAME, batch_size=batches[name],
                         delay_ms=delays[name])
        checks = probe(running, work[:3], streams)
        print(f"  checks: {checks}", flush=True)
        for name, srv in running.items():  # warm-up: the JVMs' JIT, the first forwards
            asyncio.run(closed_loop(srv.inference_port, work, max(CONCURRENCY), WARMUP_S, streams[name]))
        order = list(running)
        for i, conc in enumerate(CONCURRENCY):
            cell, runs, load = f"c{conc}", {name: Run() for name in order}, os.getloadavg()[0]
            there = order if i % 2 == 0 else order[::-1]
            for name in there + there[::-1]:  # A B C C B A: a drift in load hits every side alike
                if name != PEER and conc >= BATCH:
                    engine_rate, hf_rate, alone_rate, process_rate = bare.measure(bound_s, bound_batch(conc))
                    bounds.setdefault(cell, []).append(engine_rate)
                    hf_bounds.setdefault(cell, []).append(hf_rate)
                    alone.setdefault(cell, []).append(alone_rate)
                    process.setdefault(cell, []).append(process_rate)
                runs[name].add(measure(running[name].inference_port, work, conc, duration_s / 2,
                                       streams[name], running[name].management_port
                                       if name != PEER else None))
            for name, r in runs.items():
                cells[name][cell] = {**r.summary(), "loadavg_1m": round(load, 2)}
                c = cells[name][cell]
                print(f"  [{name}] llm {cell}: {c['tokens_per_s']} tokens/s, TTFT p50/p99 "
                      f"{c['ttft_p50_ms']}/{c['ttft_p99_ms']} ms, ITL p99 {c['itl_p99_ms']} ms, "
                      f"{c['requests']} requests, {c['errors']} errors", flush=True)
            if cell in bounds:
                print(f"  bare loop (batch {bound_batch(conc)}) beside it: {bounds[cell]} tokens/s "
                      f"(Hugging Face's forward: {hf_bounds[cell]}; the paged engine alone, decode: "
                      f"{alone[cell]}; in its engine process: {process[cell]})", flush=True)
    finally:
        for srv in running.values():
            srv.stop()
        bare.close()
    mean = {cell: sum(v) / len(v) for cell, v in bounds.items()}
    bound = {"tokens_per_s": {cell: round(v, 1) for cell, v in mean.items()}, "runs": bounds,
             "forward": bare.forward_path, "hf_forward_runs": hf_bounds,
             "hf_forward_tokens_per_s": {cell: round(sum(v) / len(v), 1) for cell, v in hf_bounds.items()},
             "engine_alone_runs": alone,
             "engine_alone_fraction": {cell: round(sum(v) / len(v) / mean[cell], 3) for cell, v in alone.items()},
             "engine_process_runs": process,
             "engine_process_fraction": {cell: round(sum(v) / len(v) / mean[cell], 3)
                                         for cell, v in process.items()},
             "batch": {f"c{c}": bound_batch(c) for c in CONCURRENCY if c >= BATCH},
             "decode_steps": sum(NEW_TOKENS) // 2, "threads": THREADS}
    out = {"settings": settings, "checks": checks, "bound": bound, "servers": cells}
    out.update(verdict(cells, mean))
    out["paged"] = verdict(cells, mean, PAGED, PAGED_BOUND_TARGET)
    for name, v in (("tserve", out), (PAGED, out["paged"])):
        for t in v["targets"]:
            shown = "inconclusive" if t["met"] is None else "met" if t["met"] else "NOT met"
            print(f"  [{name}] target {t['what']}: {t['value']} (target {t['target']}): {shown}",
                  flush=True)
    return out
