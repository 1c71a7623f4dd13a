"""Metrics API and metric logs end to end against the real server.

Prometheus mode: the frontend counters move with REST and gRPC requests, histograms have
buckets, a handler-defined metric appears with its dimensions (also from continuous-batching
handlers, both kinds), `name[]` filters. Log mode:
TorchServe's metric log lines in ts_metrics.log / model_metrics.log, system metrics every
`metric_time_interval`. A bad `metrics_config` stops startup with a clear message.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

import harness

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HANDLERS = Path(__file__).resolve().parent / "handlers"

HANDLER = textwrap.dedent('''
    """Echo handler that records a counter and a histogram through context.metrics."""
    from ts.metrics.dimension import Dimension
    from ts.metrics.metric_type_enum import MetricTypes


    def handle(data, context):
        if data is None:
            return None
        out = []
        for idx, row in enumerate(data):
            body = row.get("data") or row.get("body") or b""
            if isinstance(body, str):
                body = body.encode()
            context.metrics.add_counter("InferenceCount", 1, idx, [Dimension("Kind", "echo")])
            size = context.metrics.get_metric("PayloadSize", MetricTypes.HISTOGRAM)
            size.add_or_update(len(body), [context.model_name, "echo"], context.get_request_id(idx))
            out.append(body)
        return out
''')


def metrics_yaml(path: Path) -> Path:
    """The default metrics.yaml plus the handler's two metrics."""
    cfg = yaml.safe_load((REPO / "ts" / "configs" / "metrics.yaml").read_text())
    cfg["model_metrics"]["counter"] = [
        {"name": n, "unit": "Count", "dimensions": ["Kind", "ModelName", "Level"]}
        for n in ("InferenceCount", "TokensStreamed", "SequencesFinished")]  # the last two: metered_stream_handler
    cfg["model_metrics"]["histogram"] = [
        {"name": "PayloadSize", "unit": "B", "dimensions": ["ModelName", "Kind"], "buckets": [4, 16, 64]}]
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("metrics")
    handler = root / "echo_metrics.py"
    handler.write_text(HANDLER)
    store = root / "store"
    harness.build_mar(store, "echo", handler)
    cb = "continuousBatching: true\nbatchSize: 4\n"
    harness.build_mar(store, "metered", HANDLERS / "metered_stream_handler.py", config_yaml=cb,
                      extra_files=[HANDLERS / "counting_stream_handler.py"])
    harness.build_mar(store, "tsgen", HANDLERS / "ts_generator_handler.py", config_yaml=cb)
    return store, metrics_yaml(root / "metrics.yaml")


def scrape(server: harness.Server, *names: str) -> dict[str, dict]:
    """family name -> {"type", "samples": [(name, labels, value)]}; also checks the content type."""
    r = requests.get(f"{server.metrics_url}/metrics", params=[("name[]", n) for n in names], timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {f.name: {"type": f.type, "samples": [(s.name, s.labels, s.value) for s in f.samples]}
            for f in text_string_to_metric_families(r.text)}


def value(fams: dict, family: str, sample: str | None = None, **labels: str) -> float:
    total = 0.0
    for name, lbls, v in fams.get(family, {"samples": []})["samples"]:
        if (sample is None or name == sample) and all(lbls.get(k) == want for k, want in labels.items()):
            total += v
    return total


@pytest.fixture(scope="module")
def prom(setup):
    store, cfg = setup
    config = {"metrics_mode": "prometheus", "metrics_config": str(cfg), "load_models": "echo.mar",
              "metrics_negotiation": "true"}
    with harness.Server(store, config=config) as s:
        yield s


def test_frontend_counters_move_with_requests(prom) -> None:
    before = scrape(prom)
    for i in range(3):
        assert prom.predict("echo", data=f"rest{i}").status_code == 200
    assert requests.post(f"{prom.inference_url}/predictions/nosuch", data=b"x", timeout=30).status_code == 404
    harness.wait_for(
        lambda: value(scrape(prom), "ts_inference_latency_microseconds", model_name="echo")
        > value(before, "ts_inference_latency_microseconds", model_name="echo"), 10, what="latency counter")
    after = scrape(prom)
    req = "ts_inference_requests"   # the parser drops a counter family's _total suffix
    assert after[req]["type"] == "counter"
    assert value(after, req, model_name="echo", model_version="default") - \
        value(before, req, model_name="echo", model_version="default") == 3
    # an unknown model is a 404 (Requests4XX) but no series of its own (docs/reliability.md)
    assert not any(lb.get("model_name") == "nosuch" for _, lb, _ in after[req]["samples"])
    assert value(after, "Requests2XX", Level="Host") - value(before, "Requests2XX", Level="Host") >= 3
    assert value(after, "Requests4XX", Level="Host") - value(before, "Requests4XX", Level="Host") >= 1
    assert value(after, "ts_queue_latency_microseconds", model_name="echo") > 0
    labels = next(lb for n, lb, _ in after[req]["samples"] if lb.get("model_name") == "echo")
    assert set(labels) == {"model_name", "model_version", "hostname"}
    assert after["QueueTime"]["type"] == "gauge"
    assert [lb for _, lb, _ in after["QueueTime"]["samples"]] == [{"Level": "Host", "Hostname": labels["hostname"]}]
    assert [lb for _, lb, _ in after["WorkerThreadTime"]["samples"]] == [{"Level": "Host", "Hostname": labels["hostname"]}]


def test_worker_load_time_names_the_worker(prom) -> None:
    fams = scrape(prom, "WorkerLoadTime")
    assert list(fams) == ["WorkerLoadTime"]
    (_, labels, ms), = fams["WorkerLoadTime"]["samples"]
    assert re.fullmatch(r"W-\d+-echo_1\.0", labels["WorkerName"])
    assert labels["Level"] == "Host" and ms > 0


def test_handler_metrics_appear_with_their_dimensions(prom) -> None:
    before = value(scrape(prom), "InferenceCount", Kind="echo", ModelName="echo", Level="Model")
    for payload in ("ab", "0123456789", "x" * 40):
        assert prom.predict("echo", data=payload).status_code == 200

    def counted() -> dict | None:
        fams = scrape(prom, "InferenceCount", "PayloadSize")
        return fams if value(fams, "InferenceCount", Kind="echo", ModelName="echo", Level="Model") >= before + 3 else None

    fams = harness.wait_for(counted, 10, what="handler counter")
    assert fams["InferenceCount"]["type"] == "counter"
    (_, labels, _), = fams["InferenceCount"]["samples"]
    assert set(labels) == {"Kind", "ModelName", "Level", "Hostname"}
    hist = fams["PayloadSize"]
    assert hist["type"] == "histogram"
    buckets = {lb["le"]: v for n, lb, v in hist["samples"] if n == "PayloadSize_bucket" and lb["Kind"] == "echo"}
    assert set(buckets) == {"4.0", "16.0", "64.0", "+Inf"}
    count = value(fams, "PayloadSize", "PayloadSize_count", Kind="echo")
    assert buckets["+Inf"] == count >= 3
    assert buckets["4.0"] <= buckets["16.0"] <= buckets["64.0"] <= buckets["+Inf"]
    assert buckets["64.0"] - buckets["16.0"] >= 1       # the 40-byte payload
    assert value(fams, "PayloadSize", "PayloadSize_sum", Kind="echo") >= 2 + 10 + 40


def test_handler_metrics_from_continuous_batching(prom) -> None:
    """A continuous-batching handler's metrics reach /metrics: the hooks' kind (add_request/step,
    as ts.llm) and TorchServe's (handle() each step, which records PredictionTime)."""
    for name in ("metered", "tsgen"):
        assert prom.register(f"{name}.mar", initial_workers=1).status_code == 200
    labels = {"Kind": "count", "ModelName": "metered", "Level": "Model"}
    bodies = [json.dumps({"n": n}) for n in (2, 3, 4)]
    with ThreadPoolExecutor(3) as pool:  # together: they share steps
        for model in ("metered", "tsgen"):
            assert all(r.status_code == 200 for r in pool.map(lambda b, m=model: prom.predict(m, data=b), bodies))

    def recorded() -> dict | None:
        fams = scrape(prom, "TokensStreamed", "SequencesFinished", "PredictionTime")
        tsgen = [lb for _, lb, _ in fams["PredictionTime"]["samples"] if lb.get("ModelName") == "tsgen"]
        return fams if value(fams, "SequencesFinished", **labels) == 3 and tsgen else None

    fams = harness.wait_for(recorded, 10, what="continuous-batching handler metrics")
    assert value(fams, "TokensStreamed", **labels) == 2 + 3 + 4
    assert fams["SequencesFinished"]["type"] == "counter"


OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
PROTOBUF = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
# what Prometheus 2.x sends when it scrapes
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def test_openmetrics_when_accept_asks_for_it(prom) -> None:
    for payload in ("ab", "x" * 40):
        assert prom.predict("echo", data=payload).status_code == 200
    harness.wait_for(lambda: value(scrape(prom, "PayloadSize"), "PayloadSize", "PayloadSize_count", Kind="echo") >= 2,
                     10, what="handler histogram")
    names = ("ts_inference_requests_total", "Requests2XX", "PayloadSize")
    params = [("name[]", n) for n in names]
    text = scrape(prom, *names)
    r = requests.get(f"{prom.metrics_url}/metrics", params=params, headers={"Accept": PROMETHEUS_ACCEPT}, timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == OPENMETRICS
    assert r.text.endswith("\n# EOF\n")
    # prometheus_client's OpenMetrics parser is strict (EOF, counter _total samples, bucket order): it reads all of it
    om = {f.name: {"type": f.type, "samples": [(s.name, s.labels, s.value) for s in f.samples]}
          for f in openmetrics_families(r.text)}
    assert set(om) == {"ts_inference_requests", "Requests2XX", "PayloadSize"}
    assert om["Requests2XX"]["type"] == "counter"
    assert {n for n, _, _ in om["Requests2XX"]["samples"]} == {"Requests2XX_total"}
    # the same values as TorchServe's text answer (no inference ran between the two scrapes; Requests2XX
    # counts the scrapes themselves)
    for fam in ("ts_inference_requests", "PayloadSize"):
        assert sorted((n, sorted(lb.items()), v) for n, lb, v in om[fam]["samples"]) == \
            sorted((n, sorted(lb.items()), v) for n, lb, v in text[fam]["samples"]), fam
    # a scraper that asks for text (or nothing) keeps TorchServe's format
    plain = requests.get(f"{prom.metrics_url}/metrics", params=params, headers={"Accept": "text/plain"}, timeout=30)
    assert plain.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert '",} ' in plain.text and "# EOF" not in plain.text


def test_without_metrics_negotiation_prometheus_gets_torchserves_text(setup) -> None:
    # the default: Prometheus (which asks for OpenMetrics first) stores TorchServe's series names
    store, cfg = setup
    with harness.Server(store, config={"metrics_mode": "prometheus", "metrics_config": str(cfg)}) as s:
        r = requests.get(f"{s.metrics_url}/metrics", params=[("name[]", "Requests2XX")],
                         headers={"Accept": PROMETHEUS_ACCEPT}, timeout=30)
        assert r.status_code == 200 and r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "# EOF" not in r.text and "Requests2XX_total" not in r.text


def test_protobuf_when_accept_asks_for_it(prom) -> None:
    assert prom.predict("echo", data="pb").status_code == 200   # QueueTime has a series from then on
    r = requests.get(f"{prom.metrics_url}/metrics", params=[("name[]", "Requests2XX"), ("name[]", "QueueTime")],
                     headers={"Accept": PROTOBUF}, timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == PROTOBUF
    # varint-length-delimited MetricFamily messages, one a family, each opening with its name (field 1)
    body, pos, names = r.content, 0, []
    while pos < len(body):
        size, shift = 0, 0
        while True:
            b = body[pos]
            pos += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        message = body[pos:pos + size]
        assert len(message) == size and message[0] == 0x0A
        names.append(message[2:2 + message[1]].decode())
        pos += size
    assert sorted(names) == ["QueueTime", "Requests2XX_total"]   # protobuf names a counter with its _total


def test_name_filter(prom) -> None:
    fams = scrape(prom, "ts_inference_requests_total", "Requests2XX")
    assert set(fams) == {"ts_inference_requests", "Requests2XX"}


def test_log_mode_writes_torchserve_metric_lines(setup) -> None:
    store, cfg = setup
    config = {"metrics_mode": "log", "metrics_config": str(cfg), "load_models": "echo.mar", "metric_time_interval": 1}
    with harness.Server(store, config=config) as s:
        assert s.predict("echo", data="hello").status_code == 200
        r = requests.get(f"{s.metrics_url}/metrics", timeout=30)
        assert r.status_code == 200 and r.text == ""

        def lines(name: str, pattern: str) -> list[str]:
            return [ln for ln in s.logs(name).splitlines() if re.search(pattern, ln)]

        host = r"\|#hostname:[^,|]+,timestamp:\d+$"
        assert harness.wait_for(lambda: lines("ts_metrics.log", r" - Requests2XX\.Count:1\.0\|#Level:Host" + host),
                                10, what="Requests2XX line")
        assert harness.wait_for(lambda: lines(
            "ts_metrics.log", r" - ts_inference_requests_total\.Count:1\.0\|#model_name:echo,model_version:default" + host),
            10, what="requests_total line")
        assert harness.wait_for(lambda: lines(
            "ts_metrics.log", r" - WorkerLoadTime\.Milliseconds:\d+\.\d+\|#WorkerName:W-\d+-echo_1\.0,Level:Host" + host),
            10, what="WorkerLoadTime line")
        assert harness.wait_for(lambda: lines(
            "model_metrics.log",
            r" - InferenceCount\.Count:1(\.0)?\|#Kind:echo,ModelName:echo,Level:Model\|#hostname:[^,|]+,requestID:[^,]+,timestamp:\d+$"),
            10, what="handler metric line")
        for metric, unit in [("CPUUtilization", "Percent"), ("MemoryUsed", "Megabytes"), ("MemoryUtilization", "Percent"),
                             ("DiskAvailable", "Gigabytes"), ("DiskUtilization", "Percent")]:
            pattern = rf" - {metric}\.{unit}:\d+(\.\d+)?\|#Level:Host" + host
            assert harness.wait_for(lambda p=pattern: lines("ts_metrics.log", p), 15, what=f"{metric} line")


def test_missing_metrics_config_stops_startup(setup, tmp_path: Path) -> None:
    store, _ = setup
    missing = tmp_path / "nope.yaml"
    with pytest.raises(RuntimeError) as info:
        harness.Server(store, config={"metrics_config": str(missing)}, start_timeout=60).start()
    assert str(missing) in str(info.value) and "metrics_config" in str(info.value)


def test_gpu_metrics_from_nvidia_smi(setup, tmp_path: Path) -> None:
    """GPU gauges come from nvidia-smi's csv; a stand-in nvidia-smi on the PATH plays two GPUs."""
    store, cfg = setup
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho '0, 1024, 4096, 37'\necho '1, 0, 8192, 0'\n")
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    config = {"metrics_mode": "prometheus", "metrics_config": str(cfg), "metric_time_interval": 1}
    with harness.Server(store, config=config, env=env) as s:
        fams = harness.wait_for(lambda: (f := scrape(s, "GPUUtilization", "GPUMemoryUsed", "GPUMemoryUtilization"))
                                and len(f["GPUUtilization"]["samples"]) == 2 and f, 15, what="GPU metrics")
        assert value(fams, "GPUUtilization", DeviceId="0", Level="Host") == 37.0
        assert value(fams, "GPUMemoryUsed", DeviceId="0") == 1024.0
        assert value(fams, "GPUMemoryUtilization", DeviceId="0") == 25.0
        assert value(fams, "GPUMemoryUtilization", DeviceId="1") == 0.0
        cpu = harness.wait_for(lambda: scrape(s, "CPUUtilization")["CPUUtilization"]["samples"], 15, what="CPU")
        assert 0.0 <= cpu[0][2] <= 100.0


def test_legacy_mode_exposes_the_three_counters_and_logs_the_rest(setup) -> None:
    store, cfg = setup
    config = {"metrics_mode": "legacy", "metrics_config": str(cfg), "load_models": "echo.mar"}
    with harness.Server(store, config=config) as s:
        assert s.predict("echo", data="hi").status_code == 200
        fams = harness.wait_for(lambda: (f := scrape(s)) and value(f, "ts_inference_latency_microseconds") > 0 and f,
                                10, what="latency counter")
        assert set(fams) == {"ts_inference_requests", "ts_inference_latency_microseconds", "ts_queue_latency_microseconds"}
        assert value(fams, "ts_inference_requests", model_name="echo", model_version="default") == 1
        assert harness.wait_for(lambda: "Requests2XX.Count:1.0|#Level:Host" in s.logs("ts_metrics.log"), 10,
                                what="Requests2XX line")
        assert harness.wait_for(lambda: "InferenceCount.Count:1" in s.logs("model_metrics.log"), 10,
                                what="handler metric line")
