"""`--log-config` end to end: tserve logs through log4j2, so a TorchServe log4j2 file applies in full.

TorchServe's default config routes each logger to its file; a user's own patterns, rolling
policies and levels apply; a quiet configuration (TorchServe's recipe: warnings only, nothing
per request) writes no access or metric lines while /metrics still counts every request; a file
log4j2 cannot use stops startup with one line naming the file and the problem.
"""

from __future__ import annotations

import json
import re
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

# A TorchServe-style default config (written here from TorchServe's documented files and pattern):
# console plus one rolling file per logger under LOG_LOCATION / METRICS_LOCATION, time and size rolling.
TORCHSERVE_DEFAULT = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration>
  <Appenders>
    <Console name="STDOUT" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{ISO8601} [%-5p] %t %c - %m%n"/>
    </Console>
    <RollingFile name="access_log" fileName="${env:LOG_LOCATION:-logs}/access_log.log"
                 filePattern="${env:LOG_LOCATION:-logs}/access_log.%d{dd-MMM}.log.gz">
      <PatternLayout pattern="%d{ISO8601} - %m%n"/>
      <Policies><SizeBasedTriggeringPolicy size="100 MB"/><TimeBasedTriggeringPolicy/></Policies>
      <DefaultRolloverStrategy max="5"/>
    </RollingFile>
    <RollingFile name="model_log" fileName="${env:LOG_LOCATION:-logs}/model_log.log"
                 filePattern="${env:LOG_LOCATION:-logs}/model_log.%d{dd-MMM}.log.gz">
      <PatternLayout pattern="%d{ISO8601} [%-5p] %t %c - %m%n"/>
      <Policies><SizeBasedTriggeringPolicy size="100 MB"/><TimeBasedTriggeringPolicy/></Policies>
      <DefaultRolloverStrategy max="5"/>
    </RollingFile>
    <RollingFile name="ts_log" fileName="${env:LOG_LOCATION:-logs}/ts_log.log"
                 filePattern="${env:LOG_LOCATION:-logs}/ts_log.%d{dd-MMM}.log.gz">
      <PatternLayout pattern="%d{ISO8601} [%-5p] %t %c - %m%n"/>
      <Policies><SizeBasedTriggeringPolicy size="100 MB"/><TimeBasedTriggeringPolicy/></Policies>
      <DefaultRolloverStrategy max="5"/>
    </RollingFile>
    <RollingFile name="ts_metrics" fileName="${env:METRICS_LOCATION:-logs}/ts_metrics.log"
                 filePattern="${env:METRICS_LOCATION:-logs}/ts_metrics.%d{dd-MMM}.log.gz">
      <PatternLayout pattern="%d{ISO8601} - %m%n"/>
      <Policies><SizeBasedTriggeringPolicy size="100 MB"/><TimeBasedTriggeringPolicy/></Policies>
      <DefaultRolloverStrategy max="5"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Logger name="ACCESS_LOG" level="info"><AppenderRef ref="access_log"/></Logger>
    <Logger name="io.netty" level="error"/>
    <Logger name="MODEL_LOG" level="info"><AppenderRef ref="model_log"/></Logger>
    <Logger name="org.apache" level="off"/>
    <Logger name="org.pytorch.serve" level="info"><AppenderRef ref="ts_log"/></Logger>
    <Logger name="TS_METRICS" level="info"><AppenderRef ref="ts_metrics"/></Logger>
    <Root level="info"><AppenderRef ref="STDOUT"/></Root>
  </Loggers>
</Configuration>
"""

# A user's own choices: a custom pattern with the request's context, an access log that rolls
# at 1 KB keeping 3 files, and the workload manager's loggers quieter than the rest.
CUSTOM = """<Configuration>
  <Appenders>
    <RollingFile name="access" fileName="${env:LOG_LOCATION}/my_access.log" filePattern="${env:LOG_LOCATION}/my_access.%i.log">
      <PatternLayout pattern="ACCESS id=%X{requestId} model=%X{model} %m%n"/>
      <SizeBasedTriggeringPolicy size="1 KB"/>
      <DefaultRolloverStrategy max="3"/>
    </RollingFile>
    <File name="server" fileName="${env:LOG_LOCATION}/my_server.log">
      <PatternLayout pattern="SERVER %-5level %logger | %msg%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="ACCESS_LOG" level="info" additivity="false"><AppenderRef ref="access"/></Logger>
    <Logger name="org.pytorch.serve.wlm" level="warn"/>
    <Root level="info"><AppenderRef ref="server"/></Root>
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
        assert f"org.pytorch.serve.ModelServer - Log config: {(tmp_path / 'log4j2.xml').as_uri()}" in log, log[-2000:]
    # stopped: every appender is flushed; the config has one file, without the quiet loggers' lines
    assert sorted(p.name for p in s.log_dir.iterdir() if p.is_file()) == ["ts_log.log"]
    log = s.logs()
    assert "ACCESS_LOG" not in log and "MODEL_LOG" not in log and "TS_METRICS" not in log


def test_torchserve_default_config_routes_every_logger_to_its_file(store: Path, tmp_path: Path) -> None:
    s = server(store, tmp_path, TORCHSERVE_DEFAULT)
    with s:
        predict_all(s)
        access = harness.wait_for(lambda: s.logs("access_log.log").count("/predictions/echo") == REQUESTS
                                  and s.logs("access_log.log"), 15, what="access-log lines")
        harness.wait_for(lambda: s.logs("ts_metrics.log").count("Requests2XX.Count:1.0|#Level:Host|#hostname:") >= REQUESTS,
                         15, what="Requests2XX lines")
        assert requests_counted(s) == REQUESTS
        assert " org.pytorch.serve.ModelServer - Log config: " in s.logs()   # %c: tserve's classes under org.pytorch.serve
        assert " MODEL_LOG - " in s.logs("model_log.log")
    assert re.search(r'^\d{4}-\d\d-\d\dT[\d:]+,\d{3} - /127\.0\.0\.1:\d+ "POST /predictions/echo HTTP/1\.1" 200 \d+$', access, re.M), access
    assert not (s.log_dir / "model_metrics.log").exists()   # not in this config: nothing tserve-made appears


def test_custom_pattern_rolling_file_and_levels_apply(store: Path, tmp_path: Path) -> None:
    s = server(store, tmp_path, CUSTOM)
    with s:
        ids = []
        for i in range(40):   # ~100 bytes a line: the 1 KB access log rolls a few times
            r = requests.post(f"{s.inference_url}/predictions/echo", data=f"roll {i}".encode(), timeout=30)
            assert r.status_code == 200, r.text
            ids.append(r.headers["x-request-id"])
    rolled = sorted(p.name for p in s.log_dir.glob("my_access.*.log"))
    assert rolled == ["my_access.1.log", "my_access.2.log", "my_access.3.log"], rolled   # max="3": older ones dropped
    current = (s.log_dir / "my_access.log").read_text()
    assert (s.log_dir / "my_access.log").stat().st_size <= 1024 + 200
    last = current.splitlines()[-1]
    assert re.match(rf'ACCESS id={ids[-1]} model=echo /127\.0\.0\.1:\d+ "POST /predictions/echo HTTP/1\.1" 200 \d+$', last), last
    server_log = (s.log_dir / "my_server.log").read_text()
    assert "SERVER INFO  org.pytorch.serve.ModelServer | Log config: " in server_log
    assert "INFO  org.pytorch.serve.wlm." not in server_log   # the wlm loggers at warn: their info lines are dropped
    assert not (s.log_dir / "ts_log.log").exists() and not (s.log_dir / "access_log.log").exists()


@pytest.mark.parametrize("xml, problem", [
    ("<Configuration><Loggers><Root level=\"info\"></Loggers></Configuration>", "not valid XML: line 1, column 46"),
    ("status = warn\nrootLogger.level = info\n", "not valid XML: line 1, column 1"),
    ("<Configuration><Loggers><Logger name=\"ACCESS_LOG\" level=\"quiet\"/></Loggers></Configuration>",
     "Unknown level constant [QUIET]"),
])
def test_unusable_file_stops_startup_with_one_line(store: Path, tmp_path: Path, xml: str, problem: str) -> None:
    s = server(store, tmp_path, xml)
    with pytest.raises(RuntimeError) as err:
        s.start()
    s.stop()
    lines = [line for line in str(err.value).splitlines() if line.startswith("ERROR: ")]
    assert len(lines) == 1, str(err.value)
    assert lines[0].startswith(f"ERROR: Log config {(tmp_path / 'log4j2.xml').as_uri()} (--log-config / -Dlog4j.configurationFile) "
                               "cannot be used: "), lines[0]
    assert problem in lines[0]
    assert "Exception" not in str(err.value) and "\tat " not in str(err.value)


def test_launcher_passes_the_file_as_log4j2_does(tmp_path: Path) -> None:
    from ts import model_server

    cfg = tmp_path / "log4j2.xml"
    cfg.write_text(QUIET)
    cmd = model_server.build_java_command(model_store=tmp_path, log_config=cfg, vmargs=["-Dlog4j.configurationFile=/other.xml"])
    main = cmd.index(model_server.MAIN_CLASS)
    props = [a for a in cmd[:main] if a.startswith("-Dlog4j.configurationFile=")]
    assert props[-1] == f"-Dlog4j.configurationFile={cfg.resolve().as_uri()}"   # the last -D wins: --log-config over vmargs


def test_json_log_format_writes_one_object_per_event_with_request_model_and_worker(store: Path) -> None:
    s = harness.Server(store, {"metrics_mode": "legacy", "load_models": "echo.mar", "log_format": "json"})
    with s:
        r = requests.post(f"{s.inference_url}/predictions/echo", data=b"json please", timeout=30)
        assert r.status_code == 200, r.text
        request_id = r.headers["x-request-id"]
        harness.wait_for(lambda: request_id in s.logs("access_log.log"), 15, what="the request's access line")
    files = {p.name: p.read_text() for p in s.log_dir.glob("*.log")}
    assert {"ts_log.log", "access_log.log", "model_log.log", "ts_metrics.log", "model_metrics.log"} <= set(files), files.keys()
    events = {}
    for name, text in files.items():
        events[name] = [json.loads(line) for line in text.splitlines()]   # every line is one JSON object
        for e in events[name]:
            assert {"time", "level", "loggerName", "message", "thread"} <= e.keys(), e
    access = [e for e in events["access_log.log"] if e["contextMap"].get("requestId") == request_id]
    assert len(access) == 1, events["access_log.log"]
    assert access[0]["contextMap"]["model"] == "echo" and access[0]["loggerName"] == "ACCESS_LOG"
    assert re.match(r'/127\.0\.0\.1:\d+ "POST /predictions/echo HTTP/1\.1" 200 \d+$', access[0]["message"]), access[0]
    worker_lines = [e for e in events["model_log.log"] if e["contextMap"].get("model") == "echo"]
    assert worker_lines and all(e["contextMap"]["worker"].startswith("W-") for e in worker_lines), events["model_log.log"][:3]
    assert any(e["loggerName"] == "org.pytorch.serve.ModelServer" and e["message"].startswith("Log config: tserve's json")
               for e in events["ts_log.log"])


def test_unknown_log_format_stops_startup(store: Path) -> None:
    s = harness.Server(store, {"log_format": "xml"})
    with pytest.raises(RuntimeError) as err:
        s.start()
    s.stop()
    assert "ERROR: log_format=xml is not a log format; use text or json" in str(err.value)
