"""The headline tables of docs/benchmarks.md: one file per scenario the run measured, the others
left alone, each opening with the command, the date, the machine and the commit."""

from __future__ import annotations

from pathlib import Path

from benchmarks import headline

RUN = {
    "command": "python -m benchmarks.run --only echo,pipeline --duration 3",
    "date": "2026-12-06 07:00 UTC",
    "tserve_build": {"git_head": "0123456789abcdef"},
    "machine": {"nproc": 2, "cpu": "AMD EPYC", "mem_gb": 23.5, "loadavg_start": [0.8, 1, 1]},
    "settings": {"duration_s": 3, "pipeline_ms": 20.0},
    "servers": {
        "tserve": {"echo": {"b8_c32": {"rps": 16000.0}, "b1_c1": {"p50_ms": 0.3}},
                   "pipeline": {"w0": {"rps": 190.0}, "w1": {"rps": 350.0}}},
        "torchserve-quiet": {"echo": {"b8_c32": {"rps": 5000.0}, "b1_c1": {"p50_ms": 0.6}},
                             "pipeline": {"w0": {"rps": 180.0}}},
        "torchserve": {"echo": {"b8_c32": {"rps": 3000.0}}},
    },
}


def test_each_measured_scenario_gets_its_table_with_provenance(tmp_path: Path) -> None:
    kept = tmp_path / "llm.md"
    kept.write_text("an earlier LLM run\n")
    written = headline.write(RUN, tmp_path)
    assert sorted(p.name for p in written) == ["echo.md", "pool.md"]  # no rss, lifecycle or llm in this run
    assert kept.read_text() == "an earlier LLM run\n"  # not run this time: left as it was
    echo = (tmp_path / "echo.md").read_text().splitlines()
    assert echo[1] == ("`python -m benchmarks.run --only echo,pipeline --duration 3` · 2026-12-06 07:00 UTC · "
                       "2 CPUs (AMD EPYC), 23.5 GiB, load average 0.8 at the start · commit `0123456`")
    row = next(line for line in echo if line.startswith("| echo b8/5ms c32 req/s"))
    assert row == "| echo b8/5ms c32 req/s | 16000 | 5000 | 3.2 | ≥ 2.0 (met) | 3000 |"
    p50 = next(line for line in echo if line.startswith("| echo b1 c1 p50 ms"))
    assert "| 0.5 | ≤ 0.6 (met) |" in p50
    pool = (tmp_path / "pool.md").read_text()
    assert "| tserve, preprocessWorkers 1 | 350 | 0.88 | 1.94 |" in pool
    assert "LitServe" not in pool  # not in this run


def test_a_missed_target_is_marked() -> None:
    slow = {**RUN, "servers": {**RUN["servers"], "tserve": {"echo": {"b8_c32": {"rps": 6000.0}}}}}
    row = next(line for line in headline.tables(slow)["echo"] if line.startswith("| echo b8/5ms c32 req/s"))
    assert "≥ 2.0 (**not met**)" in row


def test_the_llm_table_has_a_row_per_engine_and_concurrency() -> None:
    cell = {"tokens_per_s": 3600.0}
    run = {"llm": {"ratios": {"c8": {"tokens_per_s": 2.5, "ttft_p99_ms": 0.06}}, "decode_fraction": {"c8": 0.81},
                   "paged": {"ratios": {"c8": {"tokens_per_s": 2.6, "ttft_p99_ms": 0.05}}, "decode_fraction": {"c8": 0.92}},
                   "servers": {"tserve": {"c8": cell}, "tserve-paged": {"c8": cell},
                               "torchserve-quiet": {"c8": {"tokens_per_s": 1400.0}}}}}
    lines = headline.tables(run)["llm"]
    assert lines[2:] == ["| rectangle | 8 | 3600 | 1400 | 2.5 | 0.06 | 0.81 |", "| paged | 8 | 3600 | 1400 | 2.6 | 0.05 | 0.92 |"]
    assert "llm" not in headline.tables({"llm": {"error": "the probe failed"}})


def test_the_vllm_runs_get_the_realistic_table(tmp_path: Path) -> None:
    cell = {"tokens_per_s": 20.0, "ttft_p99_ms": 100.0, "tpot_p50_ms": 50.0, "tokens_per_cpu_s": 30.0}
    agree = {"identical": 1, "of": 8, "before_first_divergence": 0.529}
    same = {"identical": 8, "of": 8, "before_first_divergence": 1.0}
    tokens = {"tserve_vs_vllm": agree, "self_consistency": {"tserve": same, "vllm": same}}
    run = {"model": "realistic", "dtype": "bfloat16", "tokens": tokens,
           "servers": {"tserve": {"c8": cell}, "vllm": {"c8": {**cell, "tokens_per_s": 10.0}}},
           "ratios": {"c8": {"tokens_per_s": 2.0, "ttft_p99_ms": 1.0, "tpot_p50_ms": 1.0, "tokens_per_cpu_s": 1.0}}}
    settings = {"max_seqs": 32, "step_tokens": 512, "block_size": 32, "threads": 1, "duration_s": 10.0}
    results = {"llm_vllm": {"settings": settings, "runs": [run]}}
    written = {p.name: p.read_text() for p in headline.write(results, tmp_path)}
    table = written["llm_realistic.md"]
    assert "#### realistic bfloat16" in table.splitlines() and "### realistic bfloat16" not in table.splitlines()
    assert "| c8 | 20.0 | 10.0 | 2.0 |" in table
    assert ("Greedy tokens: tserve against vLLM 1 of 8 answers identical, 53% of tokens before the first divergence; "
            "each server alone against all prompts at once: tserve 8 of 8 answers identical") in table
    assert "32 running sequences, 512 tokens a step, blocks of 32" in table
    skipped = headline.tables({"llm_vllm": {"skipped": "no AVX"}})["llm_realistic"]
    assert skipped[0] == "LLM beside vLLM: skipped (no AVX)"
