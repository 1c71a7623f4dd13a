"""Every runnable block of the pages below runs as written (see doc_commands for how ports are
kept private, and for the blocks marked illustrative), and prints what the page says it prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import harness
from doc_commands import run_page, squeezed

pytestmark = pytest.mark.slow

DOCS = harness.REPO / "docs"
EXAMPLES = harness.REPO / "examples"
LARGE = EXAMPLES / "large_models"
TINY_LLM = "python examples/llm/build_mar.py --export-path model_store >/dev/null\n"
HELLO_IDS = '"generated_ids":[211,132,53,215,138,211,10,197]'


def test_batching_page(tmp_path: Path) -> None:
    _, result = run_page(tmp_path, DOCS / "batching.md")
    out = squeezed(result.stdout)
    assert 'Model\\"echo\\"Version:1.0registeredwith1initialworkers' in out
    assert '"batchSize":8' in out and '"maxBatchDelay":5' in out and '"dispatchPolicy":"delay"' in out
    assert "hello" in result.stdout


def test_pipelines_page(tmp_path: Path) -> None:
    _, result = run_page(tmp_path, DOCS / "pipelines.md")
    out = squeezed(result.stdout)
    assert '"preprocessWorkers":2' in out and '"postprocessInPool":true' in out
    assert out.count(":0.") >= 1 and "registeredwith1initialworkers" in out   # a top-k of class probabilities


def test_workflows_page(tmp_path: Path) -> None:
    _, result = run_page(tmp_path, DOCS / "workflows.md")
    out = squeezed(result.stdout)
    assert '"status":"Workflowtext_statshasbeenregisteredandscaledsuccessfully."' in out
    assert '"upper":"HELLOWORKFLOWWORLD","words":3' in out
    assert '"workflowDag":{"pre":["upper","count"],"upper":["post"],"count":["post"],"post":[]}' in out
    assert '"status":"Workflow\\"text_stats\\"unregistered"' in out


def test_kserve_page(tmp_path: Path) -> None:
    _, result = run_page(tmp_path, DOCS / "kserve.md")
    out = squeezed(result.stdout)
    assert '"predictions":[3,12]' in out
    assert '{"name":"adder","ready":true}' in out
    assert '"outputs":[{"name":"input-0","shape":[2,2],"datatype":"FP32","data":[2.0,4.0,6.0,8.0]}]' in out


def test_grpc_page(tmp_path: Path) -> None:
    doc, result = run_page(tmp_path, DOCS / "grpc.md", python_env="PYTHONPATH=grpc_client${PYTHONPATH:+:$PYTHONPATH}")
    assert '"positive"' in result.stdout and "'ts-status': '200'" in result.stdout
    assert (doc.work / "grpc_client" / "inference_pb2.py").is_file()
    assert not (harness.REPO / "inference_pb2.py").exists()


# The overview, examples/large_models/README.md, shows commands these pages run (its blocks say
# "run by"; test_doc_blocks checks they are theirs).
@pytest.mark.parametrize("page", ["tp/README.md", "pippy/README.md", "accelerate/README.md", "deepspeed/README.md"])
def test_large_model_pages(tmp_path: Path, page: str) -> None:
    _, result = run_page(tmp_path, LARGE / page, timeout=900)
    out = squeezed(result.stdout)
    assert HELLO_IDS in out
    assert "matches the unsplit model" in result.stdout
    if page == "tp/README.md":
        assert '"generated_ids":[139,130,84,128]' in out and '"logits":[' in out


def test_llm_page(tmp_path: Path) -> None:
    # the page's calls name the model "llm" (the OpenAI section) and "tiny_llm" (the generate routes)
    served = TINY_LLM + ("torchserve --start --ncs --disable-token-auth --model-store model_store "
                         "--models llm=tiny_llm.mar tiny_llm=tiny_llm.mar\n")
    _, result = run_page(tmp_path, DOCS / "llm.md", timeout=900, setup=served, teardown="torchserve --stop\n")
    out = squeezed(result.stdout)
    assert '"object":"list"' in out and '"id":"llm"' in out  # GET /v1/models
    assert 'data:[DONE]' in out                              # the streamed chat completion
    assert '"text_output"' in out                            # generate_stream's events


def test_llm_example_page(tmp_path: Path) -> None:
    _, result = run_page(tmp_path, EXAMPLES / "llm" / "README.md", timeout=900)
    out = squeezed(result.stdout)
    assert '"finish_reason":"length"' in out and '"completion_tokens":16' in out
    assert '"object":"chat.completion.chunk"' in out and 'data:[DONE]' in out
    assert "\"suffix='!'isnotsupportedbythisserver(only\\\"\\\")\",\"type\":\"invalid_request_error\",\"param\":\"suffix\"" in out


def test_pipeline_example_page(tmp_path: Path) -> None:
    _, result = run_page(tmp_path, EXAMPLES / "pipeline" / "README.md", timeout=900)
    # the two answers, indented by the server, one right after the other (curl adds no newline)
    out, decoder, answers = result.stdout, json.JSONDecoder(), []
    at = re.search(r"^\{", out, re.M)
    position = at.start() if at else len(out)
    while position < len(out) and out[position] == "{":
        answer, position = decoder.raw_decode(out, position)
        answers.append(answer)
    assert len(answers) == 2, out
    assert len(answers[0]) == 5 and set(answers[1]) == {"negative", "neutral", "positive"}, answers  # top 5; 3 classes
