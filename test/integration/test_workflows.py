"""Workflows end to end: torch-workflow-archiver builds .war files, the management API registers
them from the workflow store (every node becomes a model <workflow>__<node>), /wfpredict runs the
DAG pre -> (upper, count in parallel) -> post, and the errors: a cycle, a node that is neither a
model nor a function, a missing .mar (400, nothing left registered), an unknown workflow (404),
a failing node (its status, naming the node), a duplicate name (409), the model API switched off (405).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

import harness
from workflow_archiver.arg_parser import WorkflowArchiverConfig
from workflow_archiver.workflow_packaging import package_workflow

pytestmark = pytest.mark.slow

EXAMPLE = harness.REPO / "examples" / "workflow"
FUNCTIONS = EXAMPLE / "workflow_handler.py"
SPEC = EXAMPLE / "spec.yaml"
FAILING = Path(__file__).resolve().parent / "workflow" / "failing.py"


def war(store: Path, name: str, spec_text: str, tmp: Path, handler: Path = FUNCTIONS) -> Path:
    spec = tmp / f"{name}.yaml"
    spec.write_text(spec_text)
    return Path(package_workflow(WorkflowArchiverConfig(workflow_name=name, spec_file=str(spec), handler=str(handler),
                                                        export_path=str(store), force=True)))


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    models = tmp_path_factory.mktemp("models")
    workflows = tmp_path_factory.mktemp("workflows")
    specs = tmp_path_factory.mktemp("specs")
    for name in ("upper", "count"):
        harness.build_mar(models, name, EXAMPLE / "text_handler.py")
    # the main workflow through the command line, as a user builds it
    cli = subprocess.run([sys.executable, "-m", "workflow_archiver", "--workflow-name", "wf", "--spec-file", str(SPEC),
                          "--handler", str(FUNCTIONS), "--export-path", str(workflows)], capture_output=True, text=True,
                         timeout=60)
    assert cli.returncode == 0, cli.stderr
    war(workflows, "cycle", "models:\n  upper:\n    url: upper.mar\ndag:\n  pre: [upper]\n  upper: [post]\n  post: [pre]\n", specs)
    war(workflows, "nofn", "dag:\n  pre: [missing_fn]\n", specs)
    war(workflows, "nomar", "models:\n  upper:\n    url: upper.mar\n  gone:\n    url: gone.mar\ndag:\n  pre: [upper, gone]\n", specs)
    war(workflows, "failing", "models:\n  retry-attempts: 0\ndag:\n  boom: []\n", specs, FAILING)
    return models, workflows


@pytest.fixture(scope="module")
def server(stores: tuple[Path, Path]):
    models, workflows = stores
    with harness.Server(models, {"workflow_store": str(workflows)}) as s:
        yield s


def mgmt(server: harness.Server, method: str, path: str, **kw) -> requests.Response:
    return requests.request(method, server.management_url + path, timeout=kw.pop("timeout", 180), **kw)


def wfpredict(server: harness.Server, name: str, text: str) -> requests.Response:
    return requests.post(f"{server.inference_url}/wfpredict/{name}", data=text.encode(),
                         headers={"Content-Type": "application/octet-stream"}, timeout=120)


def model_names(server: harness.Server) -> set[str]:
    return {m["modelName"] for m in mgmt(server, "GET", "/models").json()["models"]}


def test_archive_layout(stores: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(stores[1] / "wf.war") as z:
        assert sorted(z.namelist()) == ["WAR-INF/MANIFEST.json", "spec.yaml", "workflow_handler.py"]
        manifest = json.loads(z.read("WAR-INF/MANIFEST.json"))
    assert manifest["workflow"] == {"workflowName": "wf", "specFile": "spec.yaml", "handler": "workflow_handler.py"}
    assert manifest["createdOn"] and manifest["archiverVersion"]


def test_register_predict_describe_unregister(server: harness.Server) -> None:
    r = mgmt(server, "POST", "/workflows", params={"url": "wf.war", "workflow_name": "wf"})
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "Workflow wf has been registered and scaled successfully."}
    assert {"wf__pre", "wf__upper", "wf__count", "wf__post"} <= model_names(server)

    r = wfpredict(server, "wf", "  hello big world ")
    assert r.status_code == 200, r.text
    assert r.json() == {"upper": "HELLO BIG WORLD", "words": 3, "inputs": ["count", "upper"]}

    # concurrent requests: each answered once, with its own result
    texts = [" ".join(["w"] * n) for n in range(1, 9)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda t: wfpredict(server, "wf", t), texts))
    assert [a.status_code for a in answers] == [200] * 8
    assert [a.json()["words"] for a in answers] == list(range(1, 9))

    listed = mgmt(server, "GET", "/workflows").json()
    assert {"workflowName": "wf", "workflowUrl": "wf.war"} in listed["workflows"]
    (d,) = mgmt(server, "GET", "/workflows/wf").json()
    assert d["workflowName"] == "wf" and d["workflowUrl"] == "wf.war"
    assert d["workflowDag"] == {"pre": ["upper", "count"], "upper": ["post"], "count": ["post"], "post": []}
    assert d["models"]["count"] == "wf__count"
    (count,) = mgmt(server, "GET", "/models/wf__count").json()
    assert (count["batchSize"], count["maxBatchDelay"], count["minWorkers"]) == (4, 20, 1)

    r = mgmt(server, "DELETE", "/workflows/wf")
    assert r.status_code == 200, r.text
    assert not {"wf__pre", "wf__upper", "wf__count", "wf__post"} & model_names(server)
    assert wfpredict(server, "wf", "x").status_code == 404


def test_unknown_workflow_is_404(server: harness.Server) -> None:
    r = wfpredict(server, "nope", "x")
    assert r.status_code == 404 and "Workflow not found: nope" in r.json()["message"]
    assert mgmt(server, "GET", "/workflows/nope").status_code == 404
    assert mgmt(server, "DELETE", "/workflows/nope").status_code == 404
    r = mgmt(server, "POST", "/workflows", params={"url": "absent.war"})
    assert r.status_code == 404 and "workflow store" in r.json()["message"]


@pytest.mark.parametrize(("url", "expected"), [
    ("cycle.war", "dag has a cycle: "),
    ("nofn.war", "dag nodes [missing_fn] are neither models"),
    ("nomar.war", "node gone: "),
])
def test_bad_workflow_is_400_and_leaves_nothing(server: harness.Server, url: str, expected: str) -> None:
    r = mgmt(server, "POST", "/workflows", params={"url": url})
    assert r.status_code == 400, r.text
    assert expected in r.json()["message"]
    name = url.removesuffix(".war")
    assert not [m for m in model_names(server) if m.startswith(name + "__")]
    assert mgmt(server, "GET", f"/workflows/{name}").status_code == 404


def test_cycle_message_names_the_cycle(server: harness.Server) -> None:
    message = mgmt(server, "POST", "/workflows", params={"url": "cycle.war"}).json()["message"]
    cycle = message.split("dag has a cycle: ")[1].split(" (")[0].split(" -> ")
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == ["post", "pre", "upper"]


def test_failing_node_answers_its_error(server: harness.Server) -> None:
    r = mgmt(server, "POST", "/workflows", params={"url": "failing.war"})
    assert r.status_code == 200, r.text
    try:
        r = wfpredict(server, "failing", "data")
        assert r.status_code == 500, r.text
        message = r.json()["message"]
        assert "Workflow failing: node boom failed" in message and "boom cannot take data" in message
        r = mgmt(server, "POST", "/workflows", params={"url": "failing.war"})
        assert r.status_code == 409 and "already registered" in r.json()["message"]
    finally:
        assert mgmt(server, "DELETE", "/workflows/failing").status_code == 200


def test_registering_needs_the_model_api(stores: tuple[Path, Path]) -> None:
    models, workflows = stores
    with harness.Server(models, {"workflow_store": str(workflows)}, model_api=False) as s:
        r = mgmt(s, "POST", "/workflows", params={"url": "wf.war"})
        assert r.status_code == 405 and "enable_model_api" in r.json()["message"]
        assert mgmt(s, "DELETE", "/workflows/wf").status_code == 405
        assert mgmt(s, "GET", "/workflows").json() == {"workflows": []}


def test_client_that_leaves_stops_the_run(server: harness.Server, stores: tuple[Path, Path],
                                           tmp_path: Path) -> None:
    """A client that disconnects while the first node runs: the next node never starts."""
    marker, slow_done = tmp_path / "after-ran", tmp_path / "slow-done"
    handler = tmp_path / "slow_then_mark.py"
    handler.write_text(
        "import time\n\n\n"
        "def slow(data, context):\n"
        "    if data is None:\n        return None\n"
        "    time.sleep(1.5)\n"
        f"    open({str(slow_done)!r}, 'a').write('done')\n    return [d['body'] for d in data]\n\n\n"
        "def after(data, context):\n"
        "    if data is None:\n        return None\n"
        f"    open({str(marker)!r}, 'a').write('ran')\n    return [d['body'] for d in data]\n")
    war(stores[1], "leaver", "models:\n  retry-attempts: 0\ndag:\n  slow: [after]\n", tmp_path, handler)
    assert mgmt(server, "POST", "/workflows", params={"url": "leaver.war"}).status_code == 200
    try:
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.post(f"{server.inference_url}/wfpredict/leaver", data=b"x", timeout=0.4)
        harness.wait_for(lambda: "Workflow leaver request" in server.logs(), 10, what="the cancel log line")
        assert "client closed the connection; 1 node job(s) cancelled" in server.logs()
        harness.wait_for(slow_done.exists, 30, what="the slow node's end")
        time.sleep(0.5)   # had the run gone on, its answer would have started 'after' by now
        assert not marker.exists()
        # the control: a client that waits gets both nodes run
        r = wfpredict(server, "leaver", "y")
        assert r.status_code == 200, r.text
        assert marker.read_text() == "ran"
    finally:
        assert mgmt(server, "DELETE", "/workflows/leaver").status_code == 200
