"""Every shell block of the pages below runs as written (see doc_commands for how ports are
kept private), and prints what the page says it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness
from doc_commands import DocRun, squeezed

pytestmark = pytest.mark.slow

DOCS = harness.REPO / "docs"
LARGE = harness.REPO / "examples" / "large_models"
HELLO_IDS = '"generated_ids":[211,132,53,215,138,211,10,197]'


def run_page(tmp_path: Path, page: Path, timeout: float = 600, **kw: object):
    doc = DocRun(tmp_path)
    result = doc.run(doc.script(page, **kw), timeout)
    assert result.returncode == 0, f"{page.name}:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    assert "TorchServe has stopped." in result.stdout
    return doc, result


def test_batching_page(tmp_path: Path) -> None:
    _, result = run_page(tmp_path, DOCS / "batching.md")
    out = squeezed(result.stdout)
    assert 'Model\\"echo\\"Version:1.0registeredwith1initialworkers' in out
    assert '"batchSize":8' in out and '"maxBatchDelay":5' in out and '"dispatchPolicy":"delay"' in out
    assert "hello" in result.stdout


def test_pipelines_page(tmp_path: Path) -> None:
    # the last block is a benchmark against TorchServe 0.12, which benchmarks/run.sh installs
    _, result = run_page(tmp_path, DOCS / "pipelines.md", skip=("server_bench.py",))
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


@pytest.mark.parametrize("page", ["README.md", "tp/README.md", "pippy/README.md", "accelerate/README.md", "deepspeed/README.md"])
def test_large_model_pages(tmp_path: Path, page: str) -> None:
    _, result = run_page(tmp_path, LARGE / page, timeout=900)
    out = squeezed(result.stdout)
    assert HELLO_IDS in out
    if page == "README.md":
        assert "matches the unsplit model" in result.stdout
        assert '"generated_ids":[139,130,84,128]' in out and '"logits":[' in out
