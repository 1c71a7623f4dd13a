"""The headline tables of docs/benchmarks.md, one Markdown file per scenario in docs/results/.

``benchmarks.run`` calls :func:`write` after each run: every scenario the run measured gets its file
rewritten (tserve beside its peers, with the command, the date, the machine and the commit on the
first line); the files of scenarios it did not run are left as they are, so a partial run
(``--only llm``) updates its own table only. docs/benchmarks.md includes the files with the
``pymdownx.snippets`` extension of the docs site (``--8<-- "results/echo.md"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.report import LOUD, PEER, ROWS, _fmt, _get, _ratio, pipeline_ideal, pipeline_rows

DOCS_RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"

# which rows of report.ROWS each scenario's table shows (by the first key of the row's path)
TABLE_ROWS = {"echo": ("echo", "wrk"), "mlp": ("mlp",), "start": ("startup", "lifecycle"), "memory": ("rss",)}


def provenance(results: dict[str, Any]) -> str:
    """`command` · date · machine · commit: the first line of every table file."""
    m = results.get("machine", {})
    load = m.get("loadavg_start") or []
    machine = (f"{m.get('nproc')} CPUs ({m.get('cpu') or 'unknown CPU'}), {m.get('mem_gb')} GiB, "
               f"load average {load[0]:.1f} at the start" if load else f"{m.get('nproc')} CPUs")
    commit = _get(results, "tserve_build", "git_head") or "unknown"
    return (f"`{results.get('command', 'bash benchmarks/run.sh')}` · {results.get('date', 'undated')} · "
            f"{machine} · commit `{str(commit)[:7]}`")


def ratio_table(results: dict[str, Any], sections: tuple[str, ...]) -> list[str]:
    """The rows of report.ROWS under those sections: tserve, TorchServe 0.12 quiet and default."""
    srv = results.get("servers", {})
    ts, peer, loud = srv.get("tserve", {}), srv.get(PEER, {}), srv.get(LOUD, {})
    lines = ["| cell | tserve | TorchServe 0.12 (quiet log4j2) | tserve / TorchServe | target | "
             "TorchServe 0.12 (default logs) |", "|---|---|---|---|---|---|"]
    for label, path, higher, target in ROWS:
        if path[0] not in sections:
            continue
        a, b = _get(ts, *path), _get(peer, *path)
        if a is None and b is None:
            continue
        r = _ratio(a, b)
        tgt = "" if target is None else (f"≥ {target}" if higher else f"≤ {target}")
        if tgt and r is not None:
            tgt += " (met)" if (r >= target if higher else r <= target) else " (**not met**)"
        lines.append(f"| {label} | {_fmt(a)} | {_fmt(b)} | {_fmt(r)} | {tgt} | {_fmt(_get(loud, *path))} |")
    return lines if len(lines) > 2 else []


def pool_table(results: dict[str, Any]) -> list[str]:
    """The preprocess pool: tserve with and without a pool beside TorchServe and LitServe."""
    ms = results.get("settings", {}).get("pipeline_ms", 20.0)
    rows = pipeline_rows(results)
    if all(v is None for _, _, v in rows):
        return []
    peer = rows[2][2]
    names = ["tserve, preprocessWorkers 0", "tserve, preprocessWorkers 1", "TorchServe 0.12 (quiet log4j2)", "LitServe 0.2.19"]
    lines = [f"| server (batch 8, P = I = {ms:g} ms, c32) | req/s | of ideal | / TorchServe |", "|---|---|---|---|"]
    for name, (_, pool, rps) in zip(names, rows, strict=True):
        if rps is not None:
            lines.append(f"| {name} | {_fmt(rps)} | {rps / pipeline_ideal(ms, pool):.2f} | {_fmt(_ratio(rps, peer))} |")
    return lines


def llm_table(results: dict[str, Any]) -> list[str]:
    """The LLM scenario: each tserve engine against TorchServe's batch-and-generate, per concurrency."""
    llm = results.get("llm") or {}
    if not llm or "error" in llm:
        return []
    srv = llm.get("servers", {})
    lines = ["| tserve engine | c | tserve tok/s | TorchServe 0.12 tok/s | ratio | TTFT p99 ratio | decode / bound |",
             "|---|---|---|---|---|---|---|"]
    for name, verdict in (("tserve", llm), ("tserve-paged", llm.get("paged"))):
        if not verdict:
            continue
        engine = "paged" if name == "tserve-paged" else "rectangle"
        for cell, r in verdict.get("ratios", {}).items():
            a, b = srv.get(name, {}).get(cell, {}), srv.get(PEER, {}).get(cell, {})
            lines.append(f"| {engine} | {cell[1:]} | {_fmt(a.get('tokens_per_s'))} | {_fmt(b.get('tokens_per_s'))} | "
                         f"{_fmt(r.get('tokens_per_s'))} | {_fmt(r.get('ttft_p99_ms'))} | "
                         f"{_fmt(verdict.get('decode_fraction', {}).get(cell))} |")
    return lines if len(lines) > 2 else []


def vllm_table(results: dict[str, Any]) -> list[str]:
    """tserve beside vLLM's CPU backend, per model and dtype (llm_vllm's own tables, one level down)."""
    from benchmarks.llm_vllm import report_lines

    lines = report_lines(results.get("llm_vllm"))
    return [line.replace("## ", "### ", 1) if line.startswith("## ") else
            line.replace("### ", "#### ", 1) if line.startswith("### ") else line for line in lines]


def tables(results: dict[str, Any]) -> dict[str, list[str]]:
    """{scenario: table lines} for every scenario the run measured."""
    found = {name: ratio_table(results, sections) for name, sections in TABLE_ROWS.items()}
    found["pool"] = pool_table(results)
    found["llm"] = llm_table(results)
    found["llm_realistic"] = vllm_table(results)
    return {name: lines for name, lines in found.items() if lines}


def write(results: dict[str, Any], out_dir: Path = DOCS_RESULTS) -> list[Path]:
    """Rewrite docs/results/<scenario>.md for each scenario of this run; return the files written."""
    written = []
    head = provenance(results)
    for name, lines in tables(results).items():
        path = out_dir / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(["<!-- written by benchmarks/headline.py (make bench); edit the code, not this file -->",
                                   head, "", *lines, ""]))
        written.append(path)
    return written
