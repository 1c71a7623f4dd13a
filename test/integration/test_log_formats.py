"""The log and metric formats TorchServe users parse, compared with TorchServe 0.12's.

The expected layouts are derived from TorchServe 0.12's source, not from tserve's:

* ``access_log.log``: log4j2.xml's ``access_log`` appender, ``%d{ISO8601} - %m%n``, and the message
  of ``http/Session.toString()``: ``<remoteIp> "<method> <uri> <protocol>" <code> <ms>``, where
  remoteIp is Netty's ``channel.remoteAddress().toString()`` (``/127.0.0.1:54321``) and ms the
  whole milliseconds from decoding the request to sending the answer.
* ``ts_metrics.log`` / ``model_metrics.log``: the ``ts_metrics`` / ``model_metrics`` appenders,
  ``%d{ISO8601} - %m%n``, in ``${env:METRICS_LOCATION:-logs}`` (not ``LOG_LOCATION``), and the message
  of ``metrics/LogMetric.buildMetricString``: ``<Name>.<Unit>:<value>|#<Dim>:<v>,...|#hostname:<host>``
  then ``,requestID:<ids>`` for handler metrics, then ``,timestamp:<epoch seconds>``; the unit is
  the one metrics.yaml declares (``HandlerTime.ms``), the value Java's text of a double.
* ``ts_inference_latency_microseconds`` / ``ts_queue_latency_microseconds``: ``job/RestJob``'s
  dimensions, ``model_version`` = the version the request named, else ``default``.
* System metrics: ``MetricManager.scheduleMetrics`` runs the collector at once, then every
  ``metric_time_interval``.

With ``.bench/venv`` holding TorchServe 0.12, the same patterns are checked against its own files
(test_torchserve_writes_the_same_layouts); without it that test is skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ISO8601 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3}"   # log4j2's %d{ISO8601}
ACCESS_LINE = re.compile(
    ISO8601 + r' - /(?P<ip>[\d.]+):(?P<port>\d+) "(?P<method>[A-Z]+) (?P<uri>\S+) (?P<protocol>HTTP/\d\.\d)" '
    r"(?P<status>\d{3}) (?P<ms>\d+)$")
METRIC_LINE = re.compile(
    ISO8601 + r" - (?P<name>\w+)\.(?P<unit>\w+):(?P<value>-?\d+\.\d+(E-?\d+)?)\|#(?P<dims>[^|]*)"
    r"\|#hostname:(?P<host>[^,]+)(,requestID:(?P<request_ids>.+))?,timestamp:(?P<ts>\d+)$")

HANDLER = textwrap.dedent('''
    """A BaseHandler without a model: BaseHandler records HandlerTime, the worker PredictionTime."""
    from ts.torch_handler.base_handler import BaseHandler


    class Echo(BaseHandler):
        def initialize(self, context):
            self.initialized = True

        def preprocess(self, data):
            return [row.get("data") or row.get("body") for row in data]

        def inference(self, data, *args, **kwargs):
            return data

        def postprocess(self, data):
            return list(data)
''')

# TorchServe 0.12's own metrics (its ts/configs/metrics.yaml): kept with TorchServe's names and
# labels, which Prometheus' conventions warn about (camelCase, no _total); everything else on
# /metrics is tserve's own and must pass `promtool check metrics` without a word.
TORCHSERVE_METRICS = {
    "Requests2XX", "Requests4XX", "Requests5XX", "ts_inference_requests_total", "ts_inference_latency_microseconds",
    "ts_queue_latency_microseconds", "QueueTime", "WorkerThreadTime", "WorkerLoadTime", "CPUUtilization",
    "MemoryUsed", "MemoryAvailable", "MemoryUtilization", "DiskUsage", "DiskUtilization", "DiskAvailable",
    "GPUMemoryUtilization", "GPUMemoryUsed", "GPUUtilization", "HandlerTime", "PredictionTime",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("formats")
    handler = root / "base_echo.py"
    handler.write_text(HANDLER)
    harness.build_mar(root / "store", "echo", handler)
    return root / "store"


@pytest.fixture(scope="module")
def logged(store: Path, tmp_path_factory: pytest.TempPathFactory) -> harness.Server:
    """Log mode with only LOG_LOCATION set (METRICS_LOCATION empty = unset), as TorchServe's tests run it."""
    work = tmp_path_factory.mktemp("logged")
    env = {"LOG_LOCATION": str(work / "server-logs"), "METRICS_LOCATION": ""}
    with harness.Server(store, config={"load_models": "echo.mar"}, env=env, workdir=work) as s:
        yield s


def lines(path: Path, pattern: str = "") -> list[str]:
    try:
        return [ln for ln in path.read_text().splitlines() if pattern in ln]
    except OSError:
        return []


def test_metric_logs_go_to_metrics_location_default_not_log_location(logged: harness.Server) -> None:
    metrics_dir = logged.workdir / "logs"   # ${env:METRICS_LOCATION:-logs} in the working directory
    log_dir = logged.workdir / "server-logs"
    assert (metrics_dir / "ts_metrics.log").is_file() and (metrics_dir / "model_metrics.log").is_file()
    assert not (log_dir / "ts_metrics.log").exists() and not (log_dir / "model_metrics.log").exists()
    assert (log_dir / "access_log.log").is_file() and (log_dir / "ts_log.log").is_file()


def test_a_system_metric_sample_is_written_at_startup(logged: harness.Server) -> None:
    # metric_time_interval is 60 s (the default): the sample must not wait for it
    ts_metrics = logged.workdir / "logs" / "ts_metrics.log"
    found = harness.wait_for(lambda: lines(ts_metrics, " - CPUUtilization.Percent:"), 15, what="startup sample")
    assert METRIC_LINE.match(found[0]), found[0]
    for metric, unit in [("MemoryUsed", "Megabytes"), ("DiskAvailable", "Gigabytes"), ("DiskUtilization", "Percent")]:
        assert lines(ts_metrics, f" - {metric}.{unit}:"), metric


def test_metric_lines_are_in_the_file_when_the_answer_arrives(logged: harness.Server) -> None:
    ts_metrics = logged.workdir / "logs" / "ts_metrics.log"
    # logged before the answer, written at once: no buffer to wait for (a buffer written every
    # 200 ms would have to be written between the line and the read, five times in a row)
    for i in range(5):
        before = len(lines(ts_metrics, " - ts_inference_requests_total.Count:"))
        assert logged.predict("echo", data=f"now{i}").status_code == 200
        assert len(lines(ts_metrics, " - ts_inference_requests_total.Count:")) == before + 1, i


def test_access_lines_have_torchserves_layout(logged: harness.Server) -> None:
    with requests.Session() as http:   # one connection: one client port for the three lines
        assert http.post(f"{logged.inference_url}/predictions/echo?x=1", data=b"a", timeout=60).status_code == 200
        assert http.get(f"{logged.inference_url}/ping", timeout=60).status_code == 200
        assert http.get(f"{logged.inference_url}/nosuch", timeout=60).status_code == 404
    access = logged.workdir / "server-logs" / "access_log.log"
    got = harness.wait_for(lambda: lines(access, '"GET /nosuch ') and lines(access), 10, what="access lines")
    parsed = [m.groupdict() for m in map(ACCESS_LINE.match, got) if m]
    assert len(parsed) == len(got), got   # every line has the layout
    mine = [p for p in parsed if p["uri"] in ("/predictions/echo?x=1", "/ping", "/nosuch")]
    assert [(p["method"], p["uri"], p["protocol"], p["status"]) for p in mine[-3:]] == [
        ("POST", "/predictions/echo?x=1", "HTTP/1.1", "200"), ("GET", "/ping", "HTTP/1.1", "200"),
        ("GET", "/nosuch", "HTTP/1.1", "404")]
    assert {p["ip"] for p in mine} == {"127.0.0.1"} and len({p["port"] for p in mine[-3:]}) == 1


def test_grpc_calls_have_torchserves_access_line(logged: harness.Server, tmp_path: Path) -> None:
    """TorchServe's GRPCInterceptor: ``/<ip>:<port> "gRPC <full method> HTTP/2.0" <status code> <ms>``."""
    import grpc
    from grpc_support import compile_stubs

    stubs = compile_stubs(tmp_path)
    with grpc.insecure_channel(f"127.0.0.1:{logged.grpc_inference_port}") as ch:
        inference = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch)
        assert "Healthy" in inference.Ping(stubs.empty(), timeout=30).health
        with pytest.raises(grpc.RpcError) as err:
            inference.Predictions(stubs.inference_pb2.PredictionsRequest(model_name="nosuch"), timeout=30)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    access = logged.workdir / "server-logs" / "access_log.log"
    got = harness.wait_for(lambda: lines(access, '"gRPC ') if len(lines(access, '"gRPC ')) >= 2 else None, 10,
                           what="gRPC access lines")
    grpc_line = re.compile(ISO8601 + r' - /127\.0\.0\.1:\d+ "gRPC (?P<method>\S+) HTTP/2\.0" (?P<code>\d+) \d+$')
    parsed = [grpc_line.match(ln) for ln in got]
    assert all(parsed), got
    assert [(m["method"], m["code"]) for m in parsed if m] == [
        ("org.pytorch.serve.grpc.inference.InferenceAPIsService/Ping", "0"),
        ("org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions", str(grpc.StatusCode.NOT_FOUND.value[0]))]


def test_a_batchs_metric_lines_are_written_before_its_answer(logged: harness.Server) -> None:
    """TorchServe 0.12's test_metrics reads model_metrics.log as soon as its prediction is answered:
    the handler's metrics (PredictionTime, every batch) and the request's frontend latency lines are
    there then, with no wait."""
    log = logged.workdir / "logs" / "model_metrics.log"
    before = len(lines(log, " - PredictionTime."))
    for n in range(1, 4):
        assert logged.predict("echo", data=b"now").status_code == 200
        assert len(lines(log, " - PredictionTime.")) == before + n


def test_metric_lines_have_torchserves_layout_units_and_labels(logged: harness.Server) -> None:
    assert logged.predict("echo", data=b"m").status_code == 200
    assert logged.predict("echo", data=b"m", version="1.0").status_code == 200
    metrics_dir = logged.workdir / "logs"
    model = harness.wait_for(lambda: lines(metrics_dir / "model_metrics.log", " - PredictionTime."), 10,
                             what="PredictionTime line")
    ts = harness.wait_for(lambda: len(lines(metrics_dir / "ts_metrics.log", "ts_queue_latency")) >= 2
                          and lines(metrics_dir / "ts_metrics.log"), 10, what="latency lines")
    for line in lines(metrics_dir / "model_metrics.log") + ts:
        assert METRIC_LINE.match(line), line
    by_name: dict[str, list[dict]] = {}
    for line in lines(metrics_dir / "model_metrics.log") + ts:
        m = METRIC_LINE.match(line)
        assert m is not None
        by_name.setdefault(m["name"], []).append(m.groupdict())
    # the unit metrics.yaml declares (TorchServe's LogMetric), not the worker's "Milliseconds"
    for name in ("HandlerTime", "PredictionTime"):
        assert {(d["unit"], d["dims"]) for d in by_name[name]} == {("ms", "ModelName:echo,Level:Model")}, model
        assert all(d["request_ids"] for d in by_name[name])
    # an unversioned request is model_version "default" on every per-model counter, as TorchServe labels them
    for name in ("ts_inference_requests_total", "ts_inference_latency_microseconds", "ts_queue_latency_microseconds"):
        assert {d["dims"] for d in by_name[name]} == {"model_name:echo,model_version:default",
                                                      "model_name:echo,model_version:1.0"}, (name, by_name[name])
    assert {d["dims"] for d in by_name["Requests2XX"]} == {"Level:Host"}
    assert by_name["WorkerLoadTime"][0]["unit"] == "Milliseconds"


def test_metrics_endpoint_passes_promtool_for_everything_tserve_adds(store: Path) -> None:
    config = {"load_models": "echo.mar", "metrics_mode": "prometheus", "metric_time_interval": 1}
    with harness.Server(store, config=config) as s:
        for i in range(3):
            assert s.predict("echo", data=f"p{i}").status_code == 200
        assert s.predict("echo", data=b"v", version="1.0").status_code == 200
        assert requests.get(f"{s.inference_url}/predictions/nosuch", timeout=30).status_code == 404
        text = harness.wait_for(lambda: (t := requests.get(f"{s.metrics_url}/metrics", timeout=30).text)
                                and "ts_stage_busy_seconds{" in t and "CPUUtilization{" in t
                                and "ts_inference_latency_microseconds{" in t and t, 15, what="a full scrape")
    problems = harness.promtool_problems(text)
    ours = [p for p in problems if p.split()[0] not in TORCHSERVE_METRICS]
    assert not ours, ours
    # the latency series joins the request counter's: same labels for an unversioned request
    for name in ("ts_inference_requests_total", "ts_inference_latency_microseconds", "ts_queue_latency_microseconds"):
        assert re.search(rf'^{name}\{{model_name="echo",model_version="default",hostname="[^"]+",\}} ', text, re.M), name
    assert re.search(r'^ts_stage_busy_seconds\{model_name="echo",worker_name="W-\d+-echo_1\.0",stage="handle",'
                     r'hostname="[^"]+",\} ', text, re.M), text


def torchserve_012() -> Path | None:
    for venv in (REPO / ".bench" / "venv", Path("/work/main/.bench/venv")):
        exe = venv / "bin" / "torchserve"
        if exe.is_file() and "0.12" in subprocess.run([str(venv / "bin" / "pip"), "show", "torchserve"],
                                                      capture_output=True, text=True).stdout:
            return venv
    return None


def test_torchserve_writes_the_same_layouts(store: Path, tmp_path: Path) -> None:
    """The patterns above, checked against TorchServe 0.12 itself when .bench/venv has it."""
    venv = torchserve_012()
    if venv is None:
        pytest.skip("no TorchServe 0.12 in .bench/venv (make bench installs it): the layouts come from its source")
    ports = [harness.free_port() for _ in range(5)]
    cfg = tmp_path / "config.properties"
    cfg.write_text(f"inference_address=http://127.0.0.1:{ports[0]}\nmanagement_address=http://127.0.0.1:{ports[1]}\n"
                   f"metrics_address=http://127.0.0.1:{ports[2]}\ndisable_token_authorization=true\n"
                   f"grpc_inference_port={ports[3]}\ngrpc_management_port={ports[4]}\n"
                   "enable_model_api=true\nmodel_store=" + str(store) + "\nload_models=echo.mar\n")
    env = {**os.environ, "LOG_LOCATION": str(tmp_path / "ts-logs"), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    env.pop("METRICS_LOCATION", None)
    env.pop("PYTHONPATH", None)
    torchserve = str(venv / "bin" / "torchserve")
    try:
        with open(tmp_path / "stdout.log", "wb") as out:   # the server keeps the launcher's stdout open
            subprocess.run([torchserve, "--start", "--ncs", "--ts-config", str(cfg), "--model-store", str(store),
                            "--disable-token-auth"], cwd=tmp_path, env=env, check=True, stdout=out,
                           stderr=subprocess.STDOUT, timeout=120)
        url = f"http://127.0.0.1:{ports[0]}"
        def answered() -> bool:
            try:
                return requests.post(f"{url}/predictions/echo", data=b"x", timeout=10).status_code == 200
            except requests.RequestException:   # not listening yet, or the model still loading
                return False

        harness.wait_for(answered, 120, interval=0.5, what="TorchServe answering")
        # TorchServe logs the latencies after the answer
        harness.wait_for(lambda: lines(tmp_path / "logs" / "ts_metrics.log", "ts_queue_latency"), 10, what="latency")
        access = lines(tmp_path / "ts-logs" / "access_log.log", "/predictions/echo")
        assert access and all(ACCESS_LINE.match(ln) for ln in access), access
        for name in ("ts_metrics.log", "model_metrics.log"):
            got = lines(tmp_path / "logs" / name)
            assert got and all(METRIC_LINE.match(ln) for ln in got), got
        assert lines(tmp_path / "logs" / "model_metrics.log", " - HandlerTime.ms:")
    finally:
        with open(tmp_path / "stop.log", "wb") as out:
            subprocess.run([torchserve, "--stop"], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                           timeout=120)
