"""The standard gRPC services and HTTP/2 limits of both gRPC ports, end to end with the real clients.

- grpc.health.v1.Health (grpcio-health-checking): the server ("") is NOT_SERVING until the startup
  models are loaded, a model's name is SERVING while it has a READY worker and NOT_FOUND once it is
  unregistered; no token needed even with token authorization on.
- Server reflection (grpcio-reflection's v1alpha client, and v1 by hand): lists the inference,
  management and Open Inference Protocol services and resolves their files, behind the port's token.
- HTTP/2 limits, seen by a raw HTTP/2 client (h2 over a plain socket): GOAWAY after
  grpc_max_rst_frames_per_window resets (CVE-2023-44487), the SETTINGS frame's
  MAX_CONCURRENT_STREAMS, grpc_max_connections closing connections over the cap.
- use_native_io: epoll by default on Linux, NIO when false; both serve REST and gRPC.
- Keepalive: the server PINGs idle connections every grpc_keepalive_time_ms; client PINGs more
  often than grpc_permit_keepalive_time_ms get GOAWAY too_many_pings.
"""

from __future__ import annotations

import json
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import pytest
import requests
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from grpc_support import compile_stubs

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
DEADLINE = 60
INFERENCE = "org.pytorch.serve.grpc.inference.InferenceAPIsService"
MANAGEMENT = "org.pytorch.serve.grpc.management.ManagementAPIsService"
OIP = "org.pytorch.serve.grpc.openinference.GRPCInferenceService"
HEALTH = "grpc.health.v1.Health"
PING = f"/{INFERENCE}/Ping"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
RST_LIMIT = 50
MAX_STREAMS = 17

# initialize waits for the file named by TSERVE_TEST_GATE: the server is up, its startup model is not
GATE_HANDLER = textwrap.dedent('''
    import os
    import time


    def handle(data, context):
        if data is None:
            gate = os.environ["TSERVE_TEST_GATE"]
            deadline = time.monotonic() + 300
            while not os.path.exists(gate):
                if time.monotonic() > deadline:
                    raise RuntimeError("the test never opened the gate " + gate)
                time.sleep(0.05)
            return []
        return ["ok" for _ in data]
''')


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    return compile_stubs(tmp_path_factory.mktemp("stubs"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("grpc-standard")
    (root / "gate.py").write_text(GATE_HANDLER)
    store = root / "store"
    harness.build_mar(store, "gate", root / "gate.py")
    harness.build_mar(store, "echo", HANDLERS / "echo_handler.py")
    return store


class EarlyServer(harness.Server):
    """Counts as started once its gRPC inference port accepts connections, before the startup
    models are loaded (the real server prints its ready line only after them)."""

    def _ready(self) -> bool:
        super()._ready()  # raises if the server exited
        try:
            socket.create_connection(("127.0.0.1", self.grpc_inference_port), timeout=5).close()
            return True
        except OSError:
            return False


def health_check(port: int, service: str = "", metadata=()) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=DEADLINE, metadata=metadata).status


def health_code(port: int, service: str) -> int | grpc.StatusCode:
    """The service's status, or the call's error code (NOT_FOUND for a service the server does not know)."""
    try:
        return health_check(port, service)
    except grpc.RpcError as e:
        return e.code()


def bearer(key: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {key}")]


@pytest.fixture(scope="module")
def server(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EarlyServer]:
    """Token auth on, the gated startup model, small HTTP/2 limits. Records what health said before
    the gate opened (`before`) and what Watch streamed across it (`watched`), then waits for the
    server's ready line, so the tests after see a ready server whatever their order."""
    gate = tmp_path_factory.mktemp("gate") / "open"
    config = {"load_models": "gate.mar", "grpc_max_rst_frames_per_window": RST_LIMIT, "grpc_rst_frames_window_s": 60,
              "grpc_max_concurrent_streams": MAX_STREAMS}
    with EarlyServer(store, config, token_auth=True, env={"TSERVE_TEST_GATE": str(gate)}) as s:
        ports = {"inference": s.grpc_inference_port, "management": s.grpc_management_port}
        s.before = {name: health_check(port) for name, port in ports.items()}
        with grpc.insecure_channel(f"127.0.0.1:{s.grpc_inference_port}") as ch:
            watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE)
            s.watched = [next(watch).status]
            gate.touch()
            s.watched.append(next(watch).status)
            watch.cancel()
        harness.wait_for(lambda: harness.model_server.READY_LINE in s.output(), DEADLINE, what="the ready line")
        s.after = {name: health_check(port) for name, port in ports.items()}
        yield s


# ---------------------------------------------------------------- health


def test_health_is_not_serving_until_the_startup_models_are_loaded(server) -> None:
    assert server.before == {"inference": NOT_SERVING, "management": NOT_SERVING}
    assert server.watched == [NOT_SERVING, SERVING]
    assert server.after == {"inference": SERVING, "management": SERVING}


def test_health_of_each_service_and_model_without_token(server, stubs) -> None:
    port = server.grpc_inference_port
    # token auth is on: Ping needs the key, health does not
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        with pytest.raises(grpc.RpcError) as refused:
            stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch).Ping(stubs.empty(), timeout=DEADLINE)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    for service in (INFERENCE, OIP, MANAGEMENT):
        assert health_check(port, service) == SERVING, service
        assert health_check(server.grpc_management_port, service) == SERVING, service
    harness.wait_for(lambda: health_code(port, "gate") == SERVING, DEADLINE, what="gate SERVING")
    assert health_code(port, "nosuch") == grpc.StatusCode.NOT_FOUND

    management = {"Authorization": f"Bearer {server.keys()['management']['key']}"}
    r = requests.post(f"{server.management_url}/models", params={"url": "echo.mar", "initial_workers": 1,
                                                                  "synchronous": "true"}, headers=management, timeout=120)
    assert r.status_code == 200, r.text
    harness.wait_for(lambda: health_code(port, "echo") == SERVING, DEADLINE, what="echo SERVING")
    assert health_code(server.grpc_management_port, "echo") == SERVING
    r = requests.delete(f"{server.management_url}/models/echo", headers=management, timeout=120)
    assert r.status_code == 200, r.text
    harness.wait_for(lambda: health_code(port, "echo") == grpc.StatusCode.NOT_FOUND, DEADLINE, what="echo NOT_FOUND")
    assert health_code(port, "gate") == SERVING


# ---------------------------------------------------------------- reflection


class _AddMetadata(grpc.StreamStreamClientInterceptor):
    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self.metadata = metadata

    def intercept_stream_stream(self, continuation, details, request_iterator):
        details = details._replace(metadata=[*(details.metadata or []), *self.metadata])
        return continuation(details, request_iterator)


def _channel_with(port: int, metadata: list[tuple[str, str]]) -> grpc.Channel:
    return grpc.intercept_channel(grpc.insecure_channel(f"127.0.0.1:{port}"), _AddMetadata(metadata))


@pytest.mark.parametrize("port_name,key_name,service", [("grpc_inference_port", "inference", INFERENCE),
                                                        ("grpc_management_port", "management", MANAGEMENT)])
def test_reflection_v1alpha_lists_and_resolves_services_with_the_key(server, port_name, key_name, service) -> None:
    port = getattr(server, port_name)
    with _channel_with(port, bearer(server.keys()[key_name]["key"])) as ch:
        db = ProtoReflectionDescriptorDatabase(ch)
        services = set(db.get_services())
        expected = {INFERENCE, OIP, HEALTH} if key_name == "inference" else {MANAGEMENT, HEALTH}
        assert expected <= services, services
        assert "grpc.reflection.v1alpha.ServerReflection" in services
        assert "grpc.reflection.v1.ServerReflection" in services
        proto = db.FindFileContainingSymbol(service)
        assert service.rsplit(".", 1)[1] in [s.name for s in proto.service], proto.name
        assert db.FindFileByName(proto.name).package == proto.package


def test_reflection_v1_resolves_a_symbol(server) -> None:
    # grpc.reflection.v1 has the v1alpha messages under another service name
    request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=OIP)
    with _channel_with(server.grpc_inference_port, bearer(server.keys()["inference"]["key"])) as ch:
        call = ch.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                                response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
        (response,) = list(call(iter([request]), timeout=DEADLINE))
    files = [descriptor_pb2.FileDescriptorProto.FromString(b) for b in response.file_descriptor_response.file_descriptor_proto]
    assert "GRPCInferenceService" in [s.name for f in files for s in f.service]


@pytest.mark.parametrize("metadata", [[], bearer("wrong"), None], ids=["no-key", "wrong-key", "other-port-key"])
def test_reflection_needs_the_port_key(server, metadata) -> None:
    if metadata is None:  # the management key does not open the inference port's reflection
        metadata = bearer(server.keys()["management"]["key"])
    with _channel_with(server.grpc_inference_port, metadata) as ch:
        with pytest.raises(grpc.RpcError) as refused:
            list(ProtoReflectionDescriptorDatabase(ch).get_services())
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value


# ---------------------------------------------------------------- HTTP/2 limits (raw h2 client)


class RawH2:
    """A client HTTP/2 connection over a plain socket, driven by hand."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()
        self.events: list[h2.events.Event] = []

    def flush(self) -> None:
        self.sock.sendall(self.conn.data_to_send())

    def read_until(self, done, timeout: float = DEADLINE):
        """Reads frames until `done(event)` holds for one (returned) or the server closes (None)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if done(event):
                    del self.events[: i + 1]
                    return event
            self.events.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no such frame from the server")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                return None
            self.events.extend(self.conn.receive_data(data))
            self.flush()  # SETTINGS and PING acks

    def close(self) -> None:
        self.sock.close()


def grpc_headers(port: int, path: str, key: str) -> list[tuple[str, str]]:
    return [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"), ("te", "trailers"), ("authorization", f"Bearer {key}")]


def test_settings_advertise_max_concurrent_streams(server) -> None:
    for port in (server.grpc_inference_port, server.grpc_management_port):
        raw = RawH2(port)
        try:
            settings = raw.read_until(lambda e: isinstance(e, h2.events.RemoteSettingsChanged))
            changed = settings.changed_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS]
            assert changed.new_value == MAX_STREAMS
        finally:
            raw.close()


def test_rapid_reset_gets_goaway_while_other_connections_are_served(server, stubs) -> None:
    key = server.keys()["inference"]["key"]
    port = server.grpc_inference_port
    errors: list[Exception] = []
    answered = 0
    stop = threading.Event()

    def ping_loop() -> None:
        nonlocal answered
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch)
            while not stop.is_set() or answered == 0:
                try:
                    stub.Ping(stubs.empty(), timeout=DEADLINE, metadata=bearer(key))
                    answered += 1
                except grpc.RpcError as e:
                    errors.append(e)
                    return

    pinger = threading.Thread(target=ping_loop)
    pinger.start()
    raw = RawH2(port)
    try:
        raw.read_until(lambda e: isinstance(e, h2.events.RemoteSettingsChanged))
        headers = grpc_headers(port, PING, key)

        def rapid_resets(n: int) -> None:
            for _ in range(n):
                sid = raw.conn.get_next_available_stream_id()
                raw.conn.send_headers(sid, headers)
                raw.conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.CANCEL)
            raw.flush()

        # exactly the limit: tolerated. A PING answered after them proves the server read them all.
        rapid_resets(RST_LIMIT)
        raw.conn.ping(b"fence123")
        raw.flush()
        fence = raw.read_until(lambda e: isinstance(e, (h2.events.PingAckReceived, h2.events.ConnectionTerminated)))
        assert isinstance(fence, h2.events.PingAckReceived), fence
        # one more: GOAWAY (ENHANCE_YOUR_CALM) and the connection closes
        rapid_resets(1)
        goaway = raw.read_until(lambda e: isinstance(e, h2.events.ConnectionTerminated))
        assert goaway is not None, "the server closed the connection without GOAWAY"
        assert goaway.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, goaway
        assert b"too_many_rststreams" in (goaway.additional_data or b""), goaway
        assert raw.read_until(lambda e: False) is None  # then closes the socket
    finally:
        raw.close()
        stop.set()
        pinger.join(DEADLINE)
    assert not errors, errors
    assert answered > 0
    # and a new connection is served after it
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        health = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch).Ping(stubs.empty(), timeout=DEADLINE, metadata=bearer(key))
    assert json.loads(health.health) == {"status": "Healthy"}


# ---------------------------------------------------------------- transport and connection cap


@pytest.fixture(scope="module", params=[True, False], ids=["epoll", "nio"])
def capped(request, store: Path) -> Iterator[harness.Server]:
    """use_native_io true (the default, left out of the config) or false; two connections per gRPC port."""
    config = {"load_models": "echo.mar", "grpc_max_connections": 2}
    if not request.param:
        config["use_native_io"] = "false"
    with harness.Server(store, config) as s:
        s.native = request.param
        yield s


def test_transport_is_logged(capped) -> None:
    want = "epoll (native)" if capped.native else "nio (use_native_io=false)"
    for component in ("REST", "gRPC"):
        assert f"{component} Netty transport: {want}" in capped.logs(), component


def test_predictions_over_rest_and_grpc(capped, stubs) -> None:
    r = capped.predict("echo", b"hello")
    assert r.status_code == 200 and r.json()["text"] == "hello", r.text
    with grpc.insecure_channel(f"127.0.0.1:{capped.grpc_inference_port}") as ch:
        stub = stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch)
        out = stub.Predictions(stubs.inference_pb2.PredictionsRequest(model_name="echo", input={"data": b"hi"}),
                               timeout=DEADLINE)
    assert json.loads(out.prediction)["text"] == "hi"


def admitted(port: int) -> RawH2 | None:
    """A connection the server took (its HTTP/2 SETTINGS came back), or None if it closed it."""
    raw = RawH2(port)
    try:
        if raw.read_until(lambda e: isinstance(e, h2.events.RemoteSettingsChanged)) is not None:
            return raw
    except OSError:
        pass
    raw.close()
    return None


def test_connection_cap(capped, stubs) -> None:
    port = capped.grpc_inference_port
    # earlier tests' connections may still be closing on the server: poll until two are taken
    first = harness.wait_for(lambda: admitted(port), DEADLINE, what="a first connection")
    second = harness.wait_for(lambda: admitted(port), DEADLINE, what="a second connection")
    try:
        assert admitted(port) is None  # the third is closed before any HTTP/2 byte
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:  # a grpc client sees UNAVAILABLE
            with pytest.raises(grpc.RpcError) as refused:
                stubs.inference_pb2_grpc.InferenceAPIsServiceStub(ch).Ping(stubs.empty(), timeout=DEADLINE)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
        for raw in (first, second):  # the first two still work
            raw.conn.ping(b"stillup!")
            raw.flush()
            assert isinstance(raw.read_until(lambda e: isinstance(e, h2.events.PingAckReceived)), h2.events.PingAckReceived)
        first.close()
        third = harness.wait_for(lambda: admitted(port), DEADLINE, what="a connection after one closed")
        third.close()
    finally:
        first.close()
        second.close()
    assert "connections are open (grpc_max_connections)" in capped.logs()
    # the management port has its own cap
    other = admitted(capped.grpc_management_port)
    assert other is not None
    other.close()


# ---------------------------------------------------------------- keepalive keys

KEEPALIVE_MS, PERMIT_MS = 10_000, 1000  # 10 s: grpc-java's least keepalive time (less is raised to it)


@pytest.fixture(scope="module")
def keepalive(store: Path) -> Iterator[harness.Server]:
    """The server PINGs idle connections every 10 s; clients may PING every 1 s, with no call open."""
    config = {"load_models": "echo.mar", "grpc_keepalive_time_ms": KEEPALIVE_MS, "grpc_keepalive_timeout_ms": 5000,
              "grpc_permit_keepalive_time_ms": PERMIT_MS, "grpc_permit_keepalive_without_calls": "true"}
    with harness.Server(store, config) as s:
        yield s


def test_server_pings_an_idle_connection_every_keepalive_time(keepalive) -> None:
    raw = RawH2(keepalive.grpc_inference_port)
    try:
        raw.read_until(lambda e: isinstance(e, h2.events.RemoteSettingsChanged))
        started = time.monotonic()
        ping = raw.read_until(lambda e: isinstance(e, h2.events.PingReceived))  # acked by read_until
        waited = time.monotonic() - started
        # the key's 10 s, not the default 2 h (the read's deadline is 60 s)
        assert isinstance(ping, h2.events.PingReceived) and waited >= KEEPALIVE_MS / 1000 * 0.9, (ping, waited)
    finally:
        raw.close()


def client_pings(port: int, gap_s: float, count: int) -> h2.events.Event | None:
    """``count`` PINGs ``gap_s`` apart on a connection with no call; the last event read: a PING
    ack, or the server's GOAWAY, or None when it closed without one."""
    raw = RawH2(port)
    try:
        raw.read_until(lambda e: isinstance(e, h2.events.RemoteSettingsChanged))
        last = None
        for i in range(count):
            try:
                raw.conn.ping(f"ping{i:04d}".encode())
            except h2.exceptions.ProtocolError:  # GOAWAY came with the last ack: the connection is closed
                return raw.read_until(lambda e: isinstance(e, h2.events.ConnectionTerminated))
            raw.flush()
            last = raw.read_until(lambda e: isinstance(e, (h2.events.PingAckReceived, h2.events.ConnectionTerminated)))
            if not isinstance(last, h2.events.PingAckReceived):
                return last
            time.sleep(gap_s)
        return last
    finally:
        raw.close()


def test_client_pings_within_the_permitted_rate_are_answered(keepalive) -> None:
    last = client_pings(keepalive.grpc_inference_port, PERMIT_MS / 1000 + 0.2, 4)
    assert isinstance(last, h2.events.PingAckReceived), last


def test_client_pings_faster_than_permitted_get_goaway(keepalive) -> None:
    last = client_pings(keepalive.grpc_inference_port, 0.01, 10)
    assert isinstance(last, h2.events.ConnectionTerminated), last
    assert last.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, last
    assert b"too_many_pings" in (last.additional_data or b""), last
