"""`--log-config` end to end: the levels of a TorchServe log4j2 file apply to tserve's logs.

A quiet configuration (TorchServe's own recipe: warnings only, nothing per request) leaves
access_log.log and ts_metrics.log without lines while /metrics still counts every request; a
configuration at info keeps them; a file that is not log4j2 XML stops startup with one line
naming the file and the problem.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLER = textwrap.dedent('''
    def handle(data, context):
        if data is None:
            return None
        return [row.get("data") or row.get("body") or b"" for row in data]
''')

# What TorchServe users pass to make TorchServe fast (as benchmarks/ does for torchserve-quiet).
QUIET = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration>
  <Appenders>
    <File name="ts_log" fileName="${env:LOG_LOCATION:-logs}/ts_log.log">
      <PatternLayout pattern="%d{ISO8601} [%-5p] %t %c - %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="ACCESS_LOG" level="warn" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="MODEL_LOG" level="warn" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="MODEL_METRICS" level="warn" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="TS_METRICS" level="off" additivity="false"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="io.netty" level="error"/>
    <Logger name="org.pytorch.serve" level="info"/>
    <Root level="warn"><AppenderRef ref="ts_log"/></Root>
  </Loggers>
</Configuration>
"""

LOUD = """<Configuration>
  <Loggers>
    <Logger name="ACCESS_LOG" level="info"/>
    <Logger name="TS_METRICS" level="info"/>
    <Root level="info"/>
  </Loggers>
</Configuration>
"""

REQUESTS = 5


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("logging")
    handler = root / "echo_handler.py"
    handler.write_text(HANDLER)
    return harness.build_mar(root / "store", "echo", handler).parent


def requests_counted(server: harness.Server) -> float:
    text = requests.get(f"{server.metrics_url}/metrics", params={"name[]": "ts_inference_requests_total"}, timeout=30).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("ts_inference_requests_total{") and 'model_name="echo"' in line)


def predict_all(server: harness.Server) -> None:
    for i in range(REQUESTS):
        r = requests.post(f"{server.inference_url}/predictions/echo", data=f"hi {i}".encode(), timeout=30)
        assert r.status_code == 200, r.text
        assert r.content == f"hi {i}".encode()


def server(store: Path, tmp_path: Path, xml: str) -> harness.Server:
    cfg = tmp_path / "log4j2.xml"
    cfg.write_text(xml)
    # legacy: ts_inference_requests_total on /metrics, Requests2XX and the others as ts_metrics.log lines
    return harness.Server(store, {"metrics_mode": "legacy", "load_models": "echo.mar"}, log_config=cfg)


def test_quiet_config_drops_access_and_metric_lines_but_metrics_still_count(store: Path, tmp_path: Path) -> None:
    s = server(store, tmp_path, QUIET)
    with s:
        predict_all(s)
        harness.wait_for(lambda: requests_counted(s) == REQUESTS, 15, what=f"{REQUESTS} requests counted on /metrics")
        log = s.logs()
        assert "Log config file:" in log and "ACCESS_LOG=WARN, TS_METRICS=OFF" in log, log[-2000:]
    # stopped: every buffer is flushed, so an empty file means no line was written
    assert s.logs("access_log.log") == ""
    assert s.logs("ts_metrics.log") == ""
    assert " [INFO ] " not in s.logs("model_log.log")   # MODEL_LOG at warn: the worker's output is not copied
    assert "Model server started" not in s.logs("model_log.log")


def test_info_config_keeps_access_and_metric_lines(store: Path, tmp_path: Path) -> None:
    s = server(store, tmp_path, LOUD)
    with s:
        predict_all(s)
        access = harness.wait_for(lambda: s.logs("access_log.log").count("/predictions/echo") == REQUESTS
                                  and s.logs("access_log.log"), 15, what="access-log lines")
        harness.wait_for(lambda: s.logs("ts_metrics.log").count("Requests2XX.Count:1.0|#Level:Host|#hostname:") >= REQUESTS,
                         15, what="Requests2XX lines")
        assert requests_counted(s) == REQUESTS
    assert '"POST /predictions/echo HTTP/1.1" 200 ' in access


@pytest.mark.parametrize("xml, problem", [
    ("<Configuration><Loggers><Root level=\"info\"></Loggers></Configuration>", "is not valid XML: line 1, column"),
    ("status = warn\nrootLogger.level = info\n", "is not valid XML: line 1, column 1"),
    ("<Configuration><Loggers><Logger name=\"ACCESS_LOG\" level=\"quiet\"/></Loggers></Configuration>",
     'logger ACCESS_LOG has level "quiet"; use one of OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL'),
])
def test_unusable_file_stops_startup_with_one_line(store: Path, tmp_path: Path, xml: str, problem: str) -> None:
    s = server(store, tmp_path, xml)
    with pytest.raises(RuntimeError) as err:
        s.start()
    s.stop()
    lines = [line for line in str(err.value).splitlines() if line.startswith("ERROR: ")]
    assert len(lines) == 1, str(err.value)
    assert lines[0].startswith(f"ERROR: Log config {tmp_path / 'log4j2.xml'} (--log-config / -Dlog4j.configurationFile)")
    assert problem in lines[0]
    assert "Exception" not in str(err.value) and "\tat " not in str(err.value)


def test_launcher_passes_the_file_as_log4j2_does(tmp_path: Path) -> None:
    from ts import model_server

    cfg = tmp_path / "log4j2.xml"
    cfg.write_text(LOUD)
    cmd = model_server.build_java_command(model_store=tmp_path, log_config=cfg, vmargs=["-Dlog4j.configurationFile=/other.xml"])
    main = cmd.index(model_server.MAIN_CLASS)
    props = [a for a in cmd[:main] if a.startswith("-Dlog4j.configurationFile=")]
    assert props[-1] == f"-Dlog4j.configurationFile={cfg.resolve().as_uri()}"   # the last -D wins: --log-config over vmargs
