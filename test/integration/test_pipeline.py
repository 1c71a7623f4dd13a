"""Preprocess pool end to end through the real server (docs/pipelines.md).

One server for the module, three registrations of the same archive: `pooled` (model-config.yaml
`preprocessWorkers: 2`), `plain` (REST `preprocess_workers=0`) and `postpool` (REST
`preprocess_workers=1&postprocess_in_pool=true`), plus two archives the pool must refuse.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "test_pipeline_handlers"
WEIGHTS = [1.0, -2.0, 3.0, 0.5]
POOLED_YAML = "minWorkers: 1\nmaxWorkers: 1\nbatchSize: 4\nmaxBatchDelay: 10\npreprocessWorkers: 2\n"


def expected_y(x: list[float]) -> float:
    return round(sum(v * 2.0 * w for v, w in zip(x, WEIGHTS, strict=True)), 4)


def body(tag: str, x: list[float], **extra: object) -> bytes:
    return json.dumps({"tag": tag, "x": x, **extra}).encode()


def describe(s: harness.Server, name: str) -> dict:
    r = requests.get(f"{s.management_url}/models/{name}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("pipeline-store")
    harness.build_mar(store, "pipe", HANDLERS / "pipe_handler.py", config_yaml=POOLED_YAML)
    harness.build_mar(store, "needs_init", HANDLERS / "needs_init.py")
    harness.build_mar(store, "fn", HANDLERS / "fn_handler.py")
    with harness.Server(store, {"metrics_mode": "prometheus"}) as s:
        assert s.register("pipe.mar", model_name="pooled").status_code == 200
        r = s.register("pipe.mar", model_name="plain", preprocess_workers=0)
        assert r.status_code == 200, r.text
        r = s.register("pipe.mar", model_name="postpool", preprocess_workers=1, postprocess_in_pool="true")
        assert r.status_code == 200, r.text
        yield s


def test_describe_shows_the_settings_from_yaml_and_rest(server: harness.Server) -> None:
    pooled, plain, postpool = (describe(server, n) for n in ("pooled", "plain", "postpool"))
    assert (pooled["preprocessWorkers"], pooled["postprocessInPool"], pooled["maxBatchesInFlight"]) == (2, False, 4)
    assert (plain["preprocessWorkers"], plain["postprocessInPool"], plain["maxBatchesInFlight"]) == (0, False, 1)
    assert (postpool["preprocessWorkers"], postpool["postprocessInPool"], postpool["maxBatchesInFlight"]) == (1, True, 3)
    assert len(pooled["workers"][0]["poolPids"]) == 2
    assert len(postpool["workers"][0]["poolPids"]) == 1
    assert set(pooled["workers"][0]["stages"]) == {"preprocess", "inference", "postprocess"}
    assert set(plain["workers"][0]["stages"]) == {"handle"}
    assert "poolPids" not in plain["workers"][0]


def test_results_identical_with_the_pool_on_and_off(server: harness.Server) -> None:
    inputs = [[1, 2, 3, 4], [0.5, -1, 2, 0], [9, 9, 9, 9], [-3, 0, 0.25, 8]]
    answers = {}
    for model in ("pooled", "plain", "postpool"):
        rows = []
        for i, x in enumerate(inputs):
            r = server.predict(model, body(f"{model}-{i}", x))
            assert r.status_code == 200, r.text
            rows.append(r.json())
        answers[model] = rows
    ys = {m: [row["y"] for row in rows] for m, rows in answers.items()}
    assert ys["pooled"] == ys["plain"] == ys["postpool"] == [expected_y(x) for x in inputs]
    worker = {m: describe(server, m)["workers"][0] for m in answers}
    # who ran each stage: the pool processes (pre, and post for postpool) or the worker itself
    assert {row["pre_pid"] for row in answers["pooled"]} <= set(worker["pooled"]["poolPids"])
    assert {row["post_pid"] for row in answers["pooled"]} == {worker["pooled"]["pid"]}
    assert {row["pre_pid"] for row in answers["plain"]} == {worker["plain"]["pid"]}
    assert {row["post_pid"] for row in answers["postpool"]} == set(worker["postpool"]["poolPids"])


def test_concurrent_clients_each_get_their_own_answer(server: harness.Server) -> None:
    jobs = [(f"c{i}", [i, i % 3, -i / 4, 1]) for i in range(32)]
    with ThreadPoolExecutor(12) as ex:
        results = list(ex.map(lambda job: server.predict("pooled", body(*job)), jobs))
    for (tag, x), r in zip(jobs, results, strict=True):
        assert r.status_code == 200, r.text
        assert r.json()["tag"] == tag and r.json()["y"] == expected_y(x)


def test_preprocess_exception_fails_only_its_batch(server: harness.Server) -> None:
    r = server.predict("pooled", body("bad", [1, 2, 3, 4], op="raise"))
    assert r.status_code == 500
    assert "ValueError: cannot parse row bad: expected 4 numbers" in r.json()["message"]
    r = server.predict("pooled", body("after", [1, 1, 1, 1]))
    assert r.status_code == 200 and r.json()["y"] == expected_y([1, 1, 1, 1])


def test_sigkilled_pool_process_fails_only_its_batch_and_is_replaced(server: harness.Server, tmp_path: Path) -> None:
    before = describe(server, "pooled")["workers"][0]
    mark = tmp_path / "holder.pid"
    answer: dict[str, requests.Response] = {}
    held = threading.Thread(target=lambda: answer.setdefault("r", server.predict(
        "pooled", body("held", [1, 2, 3, 4], op="hold", mark=str(mark), s=60), timeout=120)))
    held.start()
    harness.wait_for(lambda: mark.exists() and mark.read_text().strip(), 30, what="a pool process to take the batch")
    victim = int(mark.read_text())
    assert victim in before["poolPids"]
    os.kill(victim, signal.SIGKILL)
    held.join(60)
    r = answer["r"]
    assert r.status_code == 500
    assert f"preprocess process {victim} died (killed by SIGKILL)" in r.json()["message"]
    assert "replaced" in r.json()["message"]
    # the next requests succeed, the worker itself survived, and the pool is back to two processes
    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda i: server.predict("pooled", body(f"n{i}", [i, 0, 0, 0])), range(8)))
    assert [r.status_code for r in results] == [200] * 8
    assert [r.json()["y"] for r in results] == [expected_y([i, 0, 0, 0]) for i in range(8)]
    after = harness.wait_for(lambda: (w := describe(server, "pooled")["workers"][0]) and
                             len(w["poolPids"]) == 2 and victim not in w["poolPids"] and w, 60,
                             what="a replacement pool process")
    assert after["pid"] == before["pid"]


def test_metrics_api_shows_stage_times_and_idle_fraction_per_worker(server: harness.Server) -> None:
    for i in range(4):
        assert server.predict("pooled", body(f"m{i}", [i, 1, 2, 3])).status_code == 200
    assert server.predict("plain", body("m", [1, 2, 3, 4])).status_code == 200
    text = requests.get(f"{server.metrics_url}/metrics", timeout=30).text
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    busy = {(s.labels["model_name"], s.labels["stage"]): s for s in samples if s.name == "ts_stage_busy_seconds"}
    queue = {(s.labels["model_name"], s.labels["stage"]) for s in samples if s.name == "ts_stage_queue_wait_seconds"}
    for stage in ("preprocess", "inference", "postprocess"):
        assert busy[("pooled", stage)].value > 0, stage
        assert ("pooled", stage) in queue
    assert busy[("plain", "handle")].value > 0
    pooled_worker = describe(server, "pooled")["workers"][0]
    assert busy[("pooled", "inference")].labels["worker_name"] == f"W-{pooled_worker['id']}-pooled_1.0"
    idle = [s for s in samples if s.name == "ts_inference_idle_ratio" and s.labels["model_name"] == "pooled"]
    assert len(idle) == 1 and 0 <= idle[0].value <= 1
    stages = pooled_worker["stages"]
    assert stages["preprocess"]["busyMs"] > 0 and stages["inference"]["busyMs"] > 0
    assert stages["inference"]["batches"] == stages["preprocess"]["batches"] > 0
    assert 0 <= stages["inference"]["idleFraction"] <= 1
    assert stages["postprocess"]["queueWaitMs"] >= 0


@pytest.mark.parametrize(("archive", "needles"), [
    ("needs_init.mar", ["self.vocab", "initialize_preprocess"]),
    ("fn.mar", ["module-level function", "preprocessWorkers=1 needs a handler class"]),
])
def test_registration_refuses_handlers_the_pool_cannot_run(server: harness.Server, archive: str,
                                                            needles: list[str]) -> None:
    r = server.register(archive, preprocess_workers=1)
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    for needle in needles:
        assert needle in message
    assert "Traceback" not in message
    name = archive.removesuffix(".mar")
    assert requests.get(f"{server.management_url}/models/{name}", timeout=30).status_code == 404
    # the same archive without the pool is fine
    r = server.register(archive, preprocess_workers=0)
    assert r.status_code == 200, r.text
    assert requests.delete(f"{server.management_url}/models/{name}", timeout=60).status_code == 200


def test_bad_postprocess_in_pool_parameter_is_400(server: harness.Server) -> None:
    r = server.register("pipe.mar", model_name="bad", postprocess_in_pool="maybe")
    assert r.status_code == 400
    assert "postprocess_in_pool" in r.json()["message"]


def test_batch_waiting_behind_a_killed_pool_process_is_still_served(server: harness.Server, tmp_path: Path) -> None:
    # postpool has one pool process and keeps 3 batches in flight: the second batch waits at
    # (or is already queued to) the process running the first when that process is killed.
    mark = tmp_path / "holder.pid"
    with ThreadPoolExecutor(2) as ex:
        held = ex.submit(server.predict, "postpool", body("held", [1, 2, 3, 4], op="hold", mark=str(mark), s=60),
                         timeout=120)
        harness.wait_for(lambda: mark.exists() and mark.read_text().strip(), 30, what="the pool process to take it")
        queued = ex.submit(server.predict, "postpool", body("queued", [4, 3, 2, 1]), timeout=120)
        harness.wait_for(lambda: describe(server, "postpool")["workers"][0].get("inFlight") == 2, 30,
                         what="the second batch inside the worker")
        os.kill(int(mark.read_text()), signal.SIGKILL)
        assert held.result().status_code == 500
        r = queued.result()
    assert r.status_code == 200, r.text
    assert r.json()["tag"] == "queued" and r.json()["y"] == expected_y([4, 3, 2, 1])
