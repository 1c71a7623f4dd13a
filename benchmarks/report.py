"""Markdown table of ratios tserve / TorchServe from a results dict (see benchmarks.run)."""

from __future__ import annotations

from typing import Any

from benchmarks import bound, llm_vllm

PEER = "torchserve-quiet"
LOUD = "torchserve"
TUNED = "tserve-tuned"


def _get(d: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def _ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or not b:
        return None
    return a / b


# (label, path inside a server's results, higher_is_better, target ratio or None)
ROWS: list[tuple[str, tuple[str, ...], bool, float | None]] = [
    ("echo b1 c1 req/s", ("echo", "b1_c1", "rps"), True, None),
    ("echo b1 c1 p50 ms", ("echo", "b1_c1", "p50_ms"), False, 0.6),
    ("echo b1 c1 server CPU µs/req", ("echo", "b1_c1", "cpu_us_per_req"), False, 0.4),
    ("echo b1 c8 req/s", ("echo", "b1_c8", "rps"), True, None),
    ("echo b1 c32 req/s", ("echo", "b1_c32", "rps"), True, None),
    ("echo b1 c32 p99 ms", ("echo", "b1_c32", "p99_ms"), False, None),
    ("echo b8/5ms c1 p50 ms (lone request)", ("echo", "b8_c1", "p50_ms"), False, 0.2),
    ("echo b8/5ms c1 req/s", ("echo", "b8_c1", "rps"), True, None),
    ("echo b8/5ms c8 req/s", ("echo", "b8_c8", "rps"), True, None),
    ("echo b8/5ms c32 req/s", ("echo", "b8_c32", "rps"), True, 2.0),
    ("echo b8/5ms c32 p99 ms", ("echo", "b8_c32", "p99_ms"), False, None),
    ("echo b8/5ms c32 server CPU µs/req", ("echo", "b8_c32", "cpu_us_per_req"), False, None),
    ("wrk echo b1 c1 req/s", ("wrk", "b1_c1", "rps"), True, None),
    ("wrk echo b1 c32 req/s", ("wrk", "b1_c32", "rps"), True, None),
    ("wrk echo b8/5ms c32 req/s", ("wrk", "b8_c32", "rps"), True, 2.0),
    ("mlp b1 c1 req/s", ("mlp", "b1_c1", "rps"), True, 1.0),
    ("mlp b8/5ms c32 req/s", ("mlp", "b8_c32", "rps"), True, 1.0),
    ("start → first prediction s", ("startup", "first_prediction_s"), False, 0.6),
    ("torch model: start → first prediction s", ("lifecycle", "first_prediction_s"), False, 0.4),
    ("torch model: scale 1 → 4 all READY s", ("lifecycle", "scale_s"), False, 0.3),
    ("torch model: SIGKILL → first success s", ("lifecycle", "restart_s"), False, 0.3),
    ("torch model: PSS of 4 workers MB (tserve: + zygote)", ("lifecycle", "pss_mb"), False, 0.6),
    ("frontend RSS idle MB", ("rss", "idle", "frontend_mb"), False, 0.5),
    ("frontend RSS under load MB", ("rss", "under_load", "frontend_mb"), False, None),
    ("frontend RSS after load MB", ("rss", "after_load", "frontend_mb"), False, 0.5),
    ("worker RSS idle MB", ("rss", "idle", "workers_mb"), False, None),
    ("worker RSS after load MB", ("rss", "after_load", "workers_mb"), False, None),
    ("pipeline P=I, preprocessWorkers=0 req/s", ("pipeline", "w0", "rps"), True, None),
]


def render(results: dict[str, Any]) -> str:
    srv = results.get("servers", {})
    ts, peer, loud = srv.get("tserve", {}), srv.get(PEER, {}), srv.get(LOUD, {})
    tuned = srv.get(TUNED)
    lines = [
        "| metric | tserve | TorchServe (quiet log4j2) | ratio | target | met | "
        "TorchServe (default logs) | ratio |" + (" tserve, tuned JVM | ratio |" if tuned else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|---|" if tuned else ""),
    ]
    for label, path, higher, target in ROWS:
        a, b, c = _get(ts, *path), _get(peer, *path), _get(loud, *path)
        if a is None and b is None:
            continue
        r = _ratio(a, b)
        met = ""
        if target is not None and r is not None:
            ok = r >= target if higher else r <= target
            met = "yes" if ok else "**no**"
        tgt = "" if target is None else (f"≥ {target}" if higher else f"≤ {target}")
        row = (f"| {label} | {_fmt(a)} | {_fmt(b)} | {_fmt(r)} | {tgt} | {met} | "
               f"{_fmt(c)} | {_fmt(_ratio(a, c))} |")
        if tuned is not None:
            t = _get(tuned, *path)
            row += f" {_fmt(t)} | {_fmt(_ratio(t, b))} |"
        lines.append(row)
    lines += _error_rows(srv)
    lines.append("")
    lines += _other_kinds(srv)
    lines += _compat(srv)
    lines += _pipeline(results)
    lines += _limit(results)
    lines += bound.render(results.get("bound") or {})
    lines += _llm(results)
    lines += llm_vllm.report_lines(results.get("llm_vllm"))
    m = results.get("machine", {})
    lines.append(
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu')}), {m.get('mem_gb')} GiB RAM, "
        f"load average at start {_load(m.get('loadavg_start'))}, at end "
        f"{_load(m.get('loadavg_end'))}; {results.get('settings', {}).get('duration_s')} s per "
        f"cell; whole run {results.get('wall_s')} s.")
    lines.append("")
    return "\n".join(lines)


def _other_kinds(srv: dict[str, Any]) -> list[str]:
    """The other tserve kinds of the run (e.g. tserve-nio, tserve-base), each against TorchServe
    (quiet) and against tserve, on the rows they have: an A/B of two builds or settings in one run."""
    kinds = [k for k in srv if k.startswith("tserve-") and k != TUNED]
    if not kinds:
        return []
    ts, peer = srv.get("tserve", {}), srv.get(PEER, {})
    head = "| metric | tserve | " + " | ".join(f"{k} | {k} / TorchServe | {k} / tserve" for k in kinds) + " |"
    lines = ["Other tserve kinds in the same run (ratios: the kind's value over TorchServe (quiet log4j2)'s, "
             "and over tserve's):", "", head, "|---|---|" + "---|---|---|" * len(kinds)]
    for label, path, _higher, _target in ROWS:
        values = [_get(srv[k], *path) for k in kinds]
        if all(v is None for v in values):
            continue
        cells = " | ".join(f"{_fmt(v)} | {_fmt(_ratio(v, _get(peer, *path)))} | {_fmt(_ratio(v, _get(ts, *path)))}"
                           for v in values)
        lines.append(f"| {label} | {_fmt(_get(ts, *path))} | {cells} |")
    return lines + [""]


def _load(v: Any) -> str:
    return "/".join(f"{x:.2f}" for x in v) if v else "–"


def _error_rows(srv: dict[str, Any]) -> list[str]:
    out = []
    for name, res in srv.items():
        total = 0
        for group in ("echo", "mlp", "pipeline"):
            for cell in (res.get(group) or {}).values():
                total += int(cell.get("errors", 0))
        if res.get("error"):
            msg = " ".join(res["error"].split())[:300].replace("|", "/")
            out.append(f"| {name} FAILED | {msg} | | | | | | |")
        elif total:
            out.append(f"| {name}: failed requests (all cells) | {total} | | | | | | |")
    return out


def _compat(srv: dict[str, Any]) -> list[str]:
    ts, peer = _get(srv, "tserve", "compat"), _get(srv, PEER, "compat")
    if not ts and not peer:
        return []
    return ["Archive compatibility (each server serving the archive the other archiver built): "
            f"tserve serving torch-model-archiver 0.12.0's: {ts or '–'}; TorchServe serving "
            f"tserve's model_archiver's: {peer or '–'}.", ""]


def pipeline_rows(results: dict[str, Any]) -> list[tuple[str, int, Any]]:
    """The pipeline scenario's (server, pool processes, req/s): tserve without and with a pool,
    TorchServe (quiet), LitServe; the third is the peer the others are compared with."""
    srv = results.get("servers", {})
    return [("tserve", 0, _get(srv, "tserve", "pipeline", "w0", "rps")),
            ("tserve", 1, _get(srv, "tserve", "pipeline", "w1", "rps")),
            ("TorchServe (quiet)", 0, _get(srv, PEER, "pipeline", "w0", "rps")),
            ("LitServe 0.2.19", 0, _get(srv, "litserve", "pipeline", "w0", "rps"))]


def pipeline_ideal(ms: float, pool: int) -> float:
    """req/s of batch 8 at P = I = ms: 8 / (P + I) without a pool, 8 / max(P/N, I) with N processes."""
    return 8 / ((max(ms / pool, ms) if pool else 2 * ms) / 1000.0)


def _pipeline(results: dict[str, Any]) -> list[str]:
    ms = results.get("settings", {}).get("pipeline_ms", 20.0)
    rows = pipeline_rows(results)
    if all(v is None for _, _, v in rows):
        return []
    peer = rows[2][2]
    lines = [
        f"Preprocess pipeline (batch 8, P = I = {ms:g} ms per batch, c=32). Ideal: 8 / (P + I) "
        "req/s without a pool, 8 / max(P/N, I) with N pool processes; the expectation for "
        "preprocessWorkers=1 is ≥ 0.85 × ideal.",
        "",
        "| server | preprocessWorkers | req/s | ideal req/s | of ideal | vs TorchServe |",
        "|---|---|---|---|---|---|",
    ]
    for name, n, v in rows:
        if v is None:
            continue
        ideal = pipeline_ideal(ms, n)
        frac = v / ideal
        mark = (" (met)" if frac >= 0.85 else " (**below 0.85**)") if n else ""
        shown_n = n if name == "tserve" else "– (no pool)"
        lines.append(f"| {name} | {shown_n} | {_fmt(v)} | {ideal:.0f} | {frac:.2f}{mark} | "
                     f"{_fmt(_ratio(v, peer))} |")
    lines.append("")
    return lines


def _limit(results: dict[str, Any]) -> list[str]:
    lim = results.get("limit")
    if not lim:
        return []
    ts = results.get("servers", {}).get("tserve", {})
    lines = ["The limit: a bare Python loop answering frames on a Unix socket with "
             "`ts.protocol.codec` (no HTTP, no frontend, no handler API), one frame in flight; "
             "*worker alone*: the same driver against tserve's own worker "
             "(`ts.model_service_worker`) serving the echo handler.", "",
             "| batch | bare req/s | bare worker CPU µs/req | worker alone req/s | worker alone "
             "CPU µs/req | tserve echo best req/s | tserve worker CPU µs/req | tserve / bare |",
             "|---|---|---|---|---|---|---|---|"]
    for b in ("b1", "b8"):
        cell, thr = lim.get(b), lim.get(b + "_worker") or {}
        if not cell:
            continue
        cells = [(k, v) for k, v in (ts.get("echo") or {}).items() if k.startswith(b + "_")]
        best = max(cells, key=lambda kv: kv[1].get("rps", 0), default=(None, {}))[1]
        lines.append(
            f"| {b[1:]} | {_fmt(cell['rps'])} | {_fmt(cell['worker_cpu_us_per_req'])} | "
            f"{_fmt(thr.get('rps'))} | {_fmt(thr.get('worker_cpu_us_per_req'))} | "
            f"{_fmt(best.get('rps'))} | {_fmt(best.get('worker_cpu_us_per_req'))} | "
            f"{_fmt(_ratio(best.get('rps'), cell['rps']))} |")
    lines.append("")
    return lines


def _llm(results: dict[str, Any]) -> list[str]:
    """The LLM scenario (benchmarks/llm.py): per cell, each tserve engine against TorchServe."""
    llm = results.get("llm")
    if not llm:
        return []
    if "error" in llm:
        return [f"LLM scenario FAILED: {' '.join(llm['error'].split())[:300]}", ""]
    cfg, bound = llm.get("settings", {}), llm.get("bound", {})
    lines = [f"LLM serving ({cfg.get('model')}, batch {cfg.get('batch')} (tserve {cfg.get('tserve_batch')}), max_new_tokens "
             f"{cfg.get('max_new_tokens')}, prompts of {cfg.get('prompt_tokens')} tokens): tserve "
             "continuous batching, streamed, against TorchServe batch-and-generate (maxBatchDelay "
             f"{cfg.get('torchserve_max_batch_delay_ms')} ms; its TTFT is its whole answer). "
             f"Bound: a bare decode loop at tserve's running batch ({bound.get('batch')}), no "
             f"server, measured beside tserve's runs, with {bound.get('forward')} (the forward tserve runs; "
             "HF bound: the same loop with Hugging Face's forward); decode = tserve's tokens after each first one "
             "over its time not spent prefilling (the worker's prefill stage); paged alone = the paged engine "
             "stepped under the cell's closed loop with no server (benchmarks/llm_alone.py), over the bound; "
             "paged process = the same engine in its engine process, driven by that closed loop from "
             "another process that reads and detokenizes its steps as the worker does, over the bound. "
             f"Checks: {llm.get('checks')}.", "",
             "| tserve engine | c | tserve tokens/s | TorchServe tokens/s | ratio | tserve TTFT p50 / p99 ms | "
             "TorchServe TTFT p50 / p99 ms | TTFT p99 ratio | tserve ITL p99 ms | bound tokens/s "
             "| HF bound tokens/s | tserve / bound | decode / bound | paged alone / bound | paged process / bound "
             "| load avg |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    srv = llm.get("servers", {})
    alone = bound.get("engine_alone_fraction", {})  # the paged engine's: shown on its rows only
    process = bound.get("engine_process_fraction", {})
    # the rectangle cache's verdict is the result's own keys; the paged cache's is under "paged"
    variants = [(name, v) for name, v in (("tserve", llm), ("tserve-paged", llm.get("paged"))) if v]
    for name, v in variants:
        engine = "paged" if name == "tserve-paged" else "rectangle"
        for cell, r in v.get("ratios", {}).items():
            a, b = srv.get(name, {}).get(cell, {}), srv.get(PEER, {}).get(cell, {})
            frac = v.get("bound_fraction", {}).get(cell)
            decode = v.get("decode_fraction", {}).get(cell)
            lines.append(
                f"| {engine} | {cell[1:]} | {_fmt(a.get('tokens_per_s'))} | {_fmt(b.get('tokens_per_s'))} | "
                f"{_fmt(r.get('tokens_per_s'))} | {_fmt(a.get('ttft_p50_ms'))} / "
                f"{_fmt(a.get('ttft_p99_ms'))} | {_fmt(b.get('ttft_p50_ms'))} / "
                f"{_fmt(b.get('ttft_p99_ms'))} | {_fmt(r.get('ttft_p99_ms'))} | "
                f"{_fmt(a.get('itl_p99_ms'))} | {_fmt(bound.get('tokens_per_s', {}).get(cell))} | "
                f"{_fmt(bound.get('hf_forward_tokens_per_s', {}).get(cell))} | {_fmt(frac)} | {_fmt(decode)} | "
                f"{_fmt(alone.get(cell) if engine == 'paged' else None)} | "
                f"{_fmt(process.get(cell) if engine == 'paged' else None)} | {_fmt(a.get('loadavg_1m'))} |")
    lines += ["", "| tserve engine | LLM target | value | target | met |", "|---|---|---|---|---|"]
    for name, v in variants:
        engine = "paged" if name == "tserve-paged" else "rectangle"
        lines += [f"| {engine} | {t['what']} | {_fmt(t['value'])} | {t['target']} | "
                  f"{_met(t['met'])} |" for t in v.get("targets", [])]
    lines.append("")
    return lines


def _met(met: bool | None) -> str:
    return "inconclusive (the bound read below the server)" if met is None else (
        "yes" if met else "**no**")
