"""One model across two machines: two network namespaces joined by a veth pair, one tserve in each.

The leader (10.231.0.1) lists the member (10.231.0.2) in ``cluster_members``; the member runs
``torchserve --start --member-of 10.231.0.1:8081``. A 2-node x 1-rank tensor-parallel MLP
(static rendezvous on the leader's address, gloo over the veth) must answer what the unsplit
model computes here; then the member's rank is SIGKILLed under load: requests in flight fail
naming the node, the leader restarts the job on both nodes, later requests succeed;
``torchserve --stop`` on both nodes leaves no process behind. The etcd test does the same in
dynamic mode from docs/distributed.md's config blocks, kills the member's agent, then the
leader's frontend (the member stops its ranks; the restarted leader registers on the first try).

Every address used exists only inside the test's two namespaces; the test's own client
threads enter the leader's namespace (setns) to reach it. The namespaces, the veth pair and
every process are removed in teardown.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

import harness

pytestmark = pytest.mark.slow

HANDLERS = Path(__file__).resolve().parent / "handlers"
sys.path.insert(0, str(HANDLERS))

from test_distributed import close, inputs, reference  # noqa: E402
from test_distributed_failure import tagged_processes  # noqa: E402

PYTHON = sys.executable
# test/gpu/run_multinode_gpu.sh sets nccl: one GPU per node (the member takes device 1), NCCL
GPU = os.environ.get("TSERVE_DIST_BACKEND") == "nccl"
LEADER_IP, MEMBER_IP = "10.231.0.1", "10.231.0.2"
RDZV_PORT = 29400
MGMT = 8081
CLONE_NEWNET = 0x40000000
ETCD = shutil.which("etcd")
ETCD_PORT = 2379
TP2_YAML = f"""\
minWorkers: 1
maxWorkers: 1
batchSize: 2
maxBatchDelay: 20
responseTimeout: 60
startupTimeout: 120
maxRetryTimeoutInSec: 300
deviceType: {"gpu" if GPU else "cpu"}
parallelType: tp
parallelLevel: 1
torchrun:
  nnodes: 2
  nproc-per-node: 1
  rdzv-backend: static
  rdzv-endpoint: {LEADER_IP}:{RDZV_PORT}
tp:
  plan:
    layers.0: colwise
    layers.1: rowwise
"""
# pipeline parallel across the machines: stage 0 on the leader, stage 1 on the member
# (its own rendezvous port: tp2 holds 29400 while both are registered)
PP2_YAML = TP2_YAML.replace("parallelType: tp", "parallelType: pp").replace(
    f":{RDZV_PORT}", f":{RDZV_PORT + 10}").split("tp:\n")[0] + """\
pippy:
  chunks: 2
  microbatch_size: 1
  max_length: 8
"""
# dynamic mode: an elastic job of 1 to 2 nodes on etcd ("1:2" quoted: YAML reads 1:2 as 62)
TPE_YAML = TP2_YAML.replace("  nnodes: 2\n", '  nnodes: "1:2"\n  max-restarts: 3\n  rdzv-conf: last_call_timeout=5\n').replace(
    "rdzv-backend: static", "rdzv-backend: etcd-v2").replace(f"{LEADER_IP}:{RDZV_PORT}", f"{LEADER_IP}:2379")


# the nodes' names as on Kubernetes (ordinal 0 leads, and its name sorts first)
NAMES = {LEADER_IP: "tserve-0.tserve", MEMBER_IP: "tserve-1.tserve"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "distributed.md"
# the docs' example addresses, and this test's
DOC_ADDRESSES = {"10.0.0.1": LEADER_IP, "10.0.0.2": MEMBER_IP}
# a model whose ranks on the member exit at start with an error of their own (sitecustomize below)
RANKFAIL_ERROR = "OSError: [Errno 19] /dev/tserve-test-accel: No such device"
SITECUSTOMIZE = f"""\
import os, sys
# test_multinode: the member's ranks of model rankfail fail at start (the agent itself is fine)
if "RANK" in os.environ and "-rankfail_" in os.environ.get("TSERVE_WORKER_TAG", ""):
    sys.stderr.write("Traceback (most recent call last):\\n  File \\"<tserve-test>\\", line 1, in <module>\\n")
    sys.stderr.write({RANKFAIL_ERROR!r} + "\\n")
    sys.stderr.flush()
    os._exit(1)
"""


def documented_properties() -> tuple[dict[str, str], dict[str, str]]:
    """The leader's and the member's config.properties blocks of docs/distributed.md, read as Java's
    Properties reads them (comments only on lines of their own; a value runs to the line's end)."""
    blocks = re.findall(r"```properties\n(.*?)```", DOCS.read_text(), re.S)
    assert len(blocks) >= 2, "docs/distributed.md lost its leader and member config blocks"
    parsed = []
    for block in blocks[:2]:
        props: dict[str, str] = {}
        for line in block.splitlines():
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, value = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)$", line).groups()
            assert not re.search(r"\s#\s*\S", value), f"{key} carries an inline comment: {value!r}"
            for doc_ip, ip in DOC_ADDRESSES.items():
                value = value.replace(doc_ip, ip)
            props[key] = value
        parsed.append(props)
    return parsed[0], parsed[1]


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=30)


class Namespaces:
    """Two network namespaces joined by one veth pair; names carry the test's pid."""

    def __init__(self) -> None:
        tag = os.getpid() % 100000
        self.leader, self.member = f"tsl{tag}", f"tsm{tag}"
        self.leader_if, self.member_if = f"tvl{tag}", f"tvm{tag}"

    def create(self) -> None:
        sh("ip", "netns", "add", self.leader)
        sh("ip", "netns", "add", self.member)
        sh("ip", "link", "add", self.leader_if, "type", "veth", "peer", "name", self.member_if)
        for ns, ifname, ip in ((self.leader, self.leader_if, LEADER_IP), (self.member, self.member_if, MEMBER_IP)):
            sh("ip", "link", "set", ifname, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", ifname)
            sh("ip", "-n", ns, "link", "set", ifname, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            # `ip netns exec` mounts /etc/netns/<ns>/hosts over /etc/hosts: the nodes' stable names,
            # as a StatefulSet's headless Service gives them (kubernetes/multinode/)
            Path(f"/etc/netns/{ns}").mkdir(parents=True, exist_ok=True)
            Path(f"/etc/netns/{ns}/hosts").write_text(
                f"127.0.0.1 localhost\n{LEADER_IP} {NAMES[LEADER_IP]}\n{MEMBER_IP} {NAMES[MEMBER_IP]}\n")

    def remove(self) -> None:
        # deleting a namespace deletes the veth end inside it, and with it the pair
        for ns in (self.leader, self.member):
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
        sh("ip", "link", "del", self.leader_if, check=False)   # in case it never left the root namespace


def enter(ns: str) -> None:
    """Moves the calling thread (only) into network namespace ``ns``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns} failed")
    finally:
        os.close(fd)


class Client:
    """HTTP from threads inside the leader's namespace; no proxy, no other address. With ``auth``
    (url -> headers) every call carries the token that server wants."""

    def __init__(self, ns: str, threads: int = 6, auth=None) -> None:
        self.pool = ThreadPoolExecutor(threads, initializer=enter, initargs=(ns,))
        self.local = threading.local()
        self.auth = auth

    def _session(self) -> requests.Session:
        s = getattr(self.local, "session", None)
        if s is None:
            s = requests.Session()
            s.trust_env = False
            self.local.session = s
        return s

    def _request(self, method: str, url: str, **kw) -> requests.Response:
        if self.auth is not None:
            kw["headers"] = {**self.auth(url), **kw.get("headers", {})}
        return self._session().request(method, url, **kw)

    def call(self, method: str, url: str, **kw) -> requests.Response:
        return self.pool.submit(lambda: self._request(method, url, **kw)).result()

    def submit(self, method: str, url: str, **kw):
        return self.pool.submit(lambda: self._request(method, url, **kw))

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def node_config(tmp: Path, store: Path, ip: str, extra: dict, documented: dict | None = None) -> Path:
    """The node's config.properties; ``documented`` (a block of docs/distributed.md) wins over
    everything but the test's own ports and model store, and leaves token authorization on."""
    config = {
        "inference_address": f"http://{ip}:8080",
        "management_address": f"http://{ip}:{MGMT}",
        "metrics_address": "http://127.0.0.1:8082",
        "grpc_inference_address": "127.0.0.1",
        "grpc_management_address": "127.0.0.1",
        "grpc_inference_port": 7070,
        "grpc_management_port": 7071,
        "initial_worker_port": 9000,
        "initial_distribution_port": 29500,
        "model_store": str(store),
        "disable_token_authorization": "true",
        "enable_model_api": "true",
        "default_workers_per_model": 1,
        "cluster_address": ip,
        **extra,
    }
    if documented is not None:
        del config["disable_token_authorization"]
        config.update(documented)
    return harness.write_config(tmp / "config.properties", config)


def token_auth(leader: Path, cluster_key: str):
    """Headers for a call: the leader's keys (re-read: a restarted leader has new ones), the
    cluster key on a member's /cluster API, nothing for etcd."""
    def headers(url: str) -> dict[str, str]:
        if url.startswith(f"http://{MEMBER_IP}:{MGMT}/cluster"):
            return {"Authorization": f"Bearer {cluster_key}"}
        if not url.startswith(f"http://{LEADER_IP}:") or f":{ETCD_PORT}" in url:
            return {}
        keys = json.loads((leader / "key_file.json").read_text())
        return {"Authorization": f"Bearer {keys['management' if f':{MGMT}' in url else 'inference']['key']}"}
    return headers


class Node:
    """One tserve in one namespace, started and stopped with the real CLI."""

    def __init__(self, tmp: Path, ns: str, ifname: str, config: Path, member_of: str | None = None) -> None:
        self.tmp, self.ns, self.config = tmp, ns, config
        (tmp / "tmp").mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "TMPDIR": str(tmp / "tmp"), "LOG_LOCATION": str(tmp / "logs"),
                    "METRICS_LOCATION": str(tmp / "logs"), "TS_DIST_TIMEOUT_S": "30",
                    "GLOO_SOCKET_IFNAME": ifname, "NCCL_SOCKET_IFNAME": ifname, "NO_PROXY": "*"}
        self.env.pop("TS_CONFIG_FILE", None)
        self.member_of = member_of
        self.pid: int | None = None

    def cli(self, *args: str, timeout: float = 150) -> subprocess.CompletedProcess:
        cmd = ["ip", "netns", "exec", self.ns, PYTHON, "-m", "ts.model_server", *args]
        return subprocess.run(cmd, env=self.env, cwd=self.tmp, capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        args = ["--start", "--ts-config", str(self.config), "--ncs"]
        if self.member_of:
            args += ["--member-of", self.member_of]
        r = self.cli(*args)
        assert r.returncode == 0, r.stdout + r.stderr + self.log()
        self.pid = int((self.tmp / "tmp" / ".model_server.pid").read_text())

    def stop(self) -> subprocess.CompletedProcess:
        return self.cli("--stop")

    def log(self, name: str = "ts_log.log") -> str:
        try:
            return (self.tmp / "logs" / name).read_text(errors="replace")
        except OSError:
            return ""

    def processes(self) -> list[int]:
        """The frontend and every process carrying one of its worker tags (ranks, agents)."""
        if self.pid is None:
            return []
        return ([self.pid] if harness.alive(self.pid) else []) + tagged_processes(self.pid)

    def kill_all(self) -> None:
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@contextlib.contextmanager
def two_nodes(tmp_path: Path, archives: dict[str, str], leader_only: tuple[str, ...] = (),
              members: str = f"{MEMBER_IP}:{MGMT}", member_extra: dict | None = None, etcd: bool = False,
              documented: bool = False, by_name: bool = False):
    """Namespaces, an optional etcd (leader's namespace), a member and a leader started with the
    CLI, each with its own model store holding ``archives`` (but ``leader_only`` only on the
    leader); yields (leader, member, client). With ``documented`` both configs are the docs'
    blocks (token authorization on); with ``by_name`` each node's cluster_address is its name
    (``NAMES``), as kubernetes/multinode/ sets it. Everything is stopped and removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    ns = Namespaces()
    # each node has its own model store: the archive reaches a member as the same name in its store
    for name, yaml in archives.items():
        for node in ("leader", "member"):
            if node == "leader" or name not in leader_only:
                handler = "pp_mlp_handler.py" if "parallelType: pp" in yaml else "tp_mlp_handler.py"
                harness.build_mar(tmp_path / node / "store", name, HANDLERS / handler,
                                  extra_files=[HANDLERS / "mlp_common.py"], config_yaml=yaml)
    docs_leader, docs_member = documented_properties() if documented else (None, None)
    if by_name:   # over the docs' blocks (the only use)
        assert docs_leader is not None and docs_member is not None
        docs_leader = {**docs_leader, "cluster_address": NAMES[LEADER_IP]}
        docs_member = {**docs_member, "cluster_address": NAMES[MEMBER_IP]}
    member = Node(tmp_path / "member", ns.member, ns.member_if,
                  node_config(tmp_path / "member", tmp_path / "member" / "store", MEMBER_IP, member_extra or {},
                              docs_member),
                  member_of=f"{LEADER_IP}:{MGMT}")
    # the member's ranks of model "rankfail" fail at start (and only those)
    (tmp_path / "member" / "site").mkdir(parents=True)
    (tmp_path / "member" / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    member.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path / "member" / "site"),
                                                           os.environ.get("PYTHONPATH")) if p)
    leader = Node(tmp_path / "leader", ns.leader, ns.leader_if,
                  node_config(tmp_path / "leader", tmp_path / "leader" / "store", LEADER_IP,
                              {"cluster_members": members}, docs_leader))
    client = Client(ns.leader, auth=token_auth(leader.tmp, docs_leader["cluster_key"]) if documented else None)
    # created last: nothing between here and the try below may fail and leave them behind
    try:
        ns.create()
    except subprocess.CalledProcessError as e:
        ns.remove()
        client.close()
        pytest.skip(f"the kernel refused network namespaces or veth pairs: {e.stderr.strip()}")
    server = None
    try:
        if etcd:
            server = start_etcd(ns.leader, tmp_path / "etcd", client)
        member.start()
        leader.start()
        yield leader, member, client
    finally:
        client.close()
        for node in (leader, member):
            if node.pid is not None and harness.alive(node.pid):
                node.stop()
            node.kill_all()
        if server is not None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)
        ns.remove()


def start_etcd(ns: str, data: Path, client: Client) -> subprocess.Popen:
    """A real etcd with the v2 API (torch's etcd-v2 rendezvous) on the leader's address."""
    url = f"http://{LEADER_IP}:{ETCD_PORT}"
    peer = "http://127.0.0.1:2380"
    data.mkdir(parents=True)
    log = open(data.parent / "etcd.log", "wb")   # noqa: SIM115 - kept open for the process
    proc = subprocess.Popen(["ip", "netns", "exec", ns, ETCD, "--name", "tserve-test", "--data-dir", str(data / "d"),
                             "--enable-v2", "--listen-client-urls", url, "--advertise-client-urls", url,
                             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                             "--initial-cluster", f"tserve-test={peer}"], stdout=log, stderr=subprocess.STDOUT)

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"etcd exited: {(data.parent / 'etcd.log').read_text()[-2000:]}")
        try:
            return client.call("GET", f"{url}/v2/keys", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    harness.wait_for(up, 30, interval=0.2, what="etcd to answer")
    return proc


def describe(client: Client, model: str) -> dict:
    r = client.call("GET", f"http://{LEADER_IP}:{MGMT}/models/{model}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()[0]


def predict(client: Client, row: list[float], model: str = "tp2", timeout: float = 60):
    return client.submit("POST", f"http://{LEADER_IP}:8080/predictions/{model}", json=row, timeout=timeout)


def register(client: Client, archive: str):
    return client.call("POST", f"http://{LEADER_IP}:{MGMT}/models", params={"url": archive, "synchronous": "true"},
                       timeout=300)


def member_jobs(client: Client) -> list:
    r = client.call("GET", f"http://{MEMBER_IP}:{MGMT}/cluster/workers", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def check_answers(client: Client, model: str, rows: list[list[float]]) -> None:
    """Answers equal the unsplit model, under concurrent requests."""
    got = [f.result() for f in [predict(client, row, model) for row in rows]]
    for resp, want in zip(got, reference(rows), strict=True):
        assert resp.status_code == 200, resp.text
        assert close(resp.json(), want), (resp.json(), want)


def both_nodes_ready(client: Client, model: str) -> dict | None:
    w = describe(client, model)["workers"]
    if not w or w[0]["status"] != "READY":
        return None
    nodes = w[0].get("nodes", [])
    ok = len(nodes) == 2 and all(n["state"] == "READY" and n.get("ranks") and
                                 all(r["state"] == "READY" for r in n["ranks"]) for n in nodes)
    return w[0] if ok else None


def kill_member_agent_under_load(client: Client, model: str, rows: list, member_agent: int, report: Path,
                                 what: str = "member agent") -> tuple:
    """SIGKILLs the member's agent (or ``what`` it is: a rank) while 3 clients send requests; waits
    for a failure and then three successes in a row. Returns (failed, succeeded after the kill,
    recovery seconds)."""
    stop_load = threading.Event()
    results: list[tuple[float, int, str]] = []

    def load() -> None:
        i = 0
        while not stop_load.is_set():
            row = rows[i % len(rows)]
            i += 1
            try:
                resp = predict(client, row, model, timeout=120).result()
                results.append((time.monotonic(), resp.status_code, resp.text[:300]))
            except requests.RequestException as e:
                results.append((time.monotonic(), 599, str(e)[:300]))

    loaders = [threading.Thread(target=load) for _ in range(3)]
    for t in loaders:
        t.start()
    time.sleep(2)
    killed_at = time.monotonic()
    os.kill(member_agent, signal.SIGKILL)

    def recovered() -> bool:
        # a failure was seen (the job broke), and the three latest requests after it succeeded
        after = [code for t, code, _ in results if t > killed_at]
        last_failure = max((i for i, c in enumerate(after) if c != 200), default=None)
        return last_failure is not None and after[last_failure + 1:][-3:] == [200, 200, 200]

    try:
        harness.wait_for(recovered, 240, interval=0.2, what="requests to succeed again after the member was killed")
    finally:
        stop_load.set()
        for t in loaders:
            t.join(150)
    before = [x for x in results if x[0] <= killed_at]
    after = [x for x in results if x[0] > killed_at]
    failed = [x for x in after if x[1] != 200]
    last_failure = failed[-1][0] if failed else killed_at
    recovered_at = next((t for t, code, _ in after if code == 200 and t > last_failure), None)
    recovery_s = None if recovered_at is None else recovered_at - killed_at
    line = (f"{model}: {what} SIGKILLed under load: before the kill {len(before)} requests, all 200: "
            f"{all(c == 200 for _, c, _ in before)}; after it {len(after)} requests, {len(after) - len(failed)} "
            f"succeeded, {len(failed)} failed; recovered {recovery_s and round(recovery_s, 1)} s after the kill")
    print(line)
    report.write_text(line + "\n" + "\n".join(f"{t - killed_at:+.2f}s {code} {text}" for t, code, text in after))
    assert all(code == 200 for _, code, _ in before)
    assert failed and recovery_s is not None
    # the failures name the lost node (or come from rank 0's broken collective while it is noticed)
    assert any(MEMBER_IP in text for _, _, text in failed), failed[:5]
    assert all(code in (500, 503) for _, code, _ in failed), failed[:5]
    return len(failed), len(after) - len(failed), recovery_s


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def check_identities(nodes: list, member: Node, model: str) -> None:
    """describe's node ``pid`` is the node's torchrun agent, each rank's pid its own; the member's
    model log names its ranks by their global rank."""
    for n in nodes:
        assert "torch.distributed.run" in cmdline(n["pid"]), (n, cmdline(n["pid"]))
        for r in n["ranks"]:
            assert r["pid"] != n["pid"] and "ts.model_service_worker" in cmdline(r["pid"]), (n, cmdline(r["pid"]))
    prefixes = set(re.findall(rf"-{model}_1\.0 rank (\d+): ", member.log("model_log.log")))
    assert prefixes == {"1"}, prefixes   # the member holds global rank 1 (its local rank 0)


def stop_both(leader: Node, member: Node) -> None:
    """`torchserve --stop` on both nodes: nothing of either is left."""
    for node in (leader, member):
        out = node.stop()
        assert out.returncode == 0, out.stdout + out.stderr
    harness.wait_for(lambda: not leader.processes() and not member.processes(), 30,
                     what="no process of either node left")


def test_tp_across_two_namespaces_then_member_killed_under_load(tmp_path: Path) -> None:
    archives = {"tp2": TP2_YAML, "tp3": TP2_YAML.replace("nnodes: 2", "nnodes: 3"), "rankfail": TP2_YAML,
                "gpu2": TP2_YAML.replace("deviceType: cpu", "deviceType: gpu").replace("parallelLevel: 1",
                                                                                      "parallelLevel: 2")
                .replace("nproc-per-node: 1", "nproc-per-node: 2"),
                "only_leader": TP2_YAML, "pp2": PP2_YAML}
    # node 2 of the leader's list is a port nobody listens on: an unreachable member; each node
    # its own device: the member's models entry pins tp2 to device 1 (GPU runs)
    member_extra = ({"models": '{"tp2": {"1.0": {"deviceIds": [1]}}, "pp2": {"1.0": {"deviceIds": [1]}}}'} if GPU
                    else {"number_of_gpu": 1})
    with two_nodes(tmp_path, archives, leader_only=("only_leader",), members=f"{MEMBER_IP}:{MGMT},{MEMBER_IP}:{MGMT + 18}",
                   member_extra=member_extra) as (leader, member, client):
        # registrations a member cannot take fail naming that member, and leave nothing behind
        r = register(client, "only_leader.mar")
        assert r.status_code == 404, r.text
        assert f"node 1 ({MEMBER_IP}:{MGMT})" in r.json()["message"] and "only_leader.mar" in r.json()["message"]
        if not GPU:   # the member has one (fake) device; gpu2 needs two per node
            r = register(client, "gpu2.mar")
            assert r.status_code == 507, r.text
            assert f"node 1 ({MEMBER_IP}:{MGMT})" in r.json()["message"] and "device" in r.json()["message"]
        r = register(client, "tp3.mar")
        assert r.status_code == 502, r.text
        assert f"node 2 ({MEMBER_IP}:{MGMT + 18})" in r.json()["message"] and "unreachable" in r.json()["message"]
        # the member's rank exits at start: the answer names the node and the rank's own error,
        # not only torchrun's summary or "exited with status 1"
        r = register(client, "rankfail.mar")
        assert r.status_code == 500, r.text
        assert f"node 1 ({MEMBER_IP}:{MGMT})" in r.json()["message"] and RANKFAIL_ERROR in r.json()["message"], r.text
        assert member_jobs(client) == []
        assert client.call("GET", f"http://{LEADER_IP}:{MGMT}/models", timeout=30).json()["models"] == []
        assert not member.processes()[1:] and not leader.processes()[1:]

        r = register(client, "tp2.mar")
        assert r.status_code == 200, r.text + leader.log()[-3000:] + member.log()[-3000:]
        rows = inputs(8)
        check_answers(client, "tp2", rows)

        # describe on the leader shows both nodes and their ranks (members' state as last polled)
        nodes = harness.wait_for(lambda: both_nodes_ready(client, "tp2"), 30, interval=0.2,
                                 what="describe to show both nodes READY")["nodes"]
        assert [n["node"] for n in nodes] == [0, 1]
        assert nodes[1]["address"] == f"{MEMBER_IP}:{MGMT}" and nodes[1]["state"] == "READY"
        assert [r["rank"] for r in nodes[0]["ranks"]] == [0] and [r["rank"] for r in nodes[1]["ranks"]] == [1]
        if GPU:
            assert nodes[0]["ranks"][0]["devices"] == "0" and nodes[1]["ranks"][0]["devices"] == "1", nodes
        for node in (leader, member):
            backend = "nccl" if GPU else "gloo"
            assert f"process group ready ({backend}" in node.log("model_log.log"), node.log("model_log.log")[-2000:]
        check_identities(nodes, member, "tp2")
        member_agent, member_rank = nodes[1]["pid"], nodes[1]["ranks"][0]["pid"]
        assert member_agent > 0 and harness.alive(member_agent)

        # static mode: a member's rank dies (its agent, with no restarts of its own, exits): the
        # leader restarts the job on both nodes (the agent SIGKILLed alone: the etcd test below)
        kill_member_agent_under_load(client, "tp2", rows, member_rank, tmp_path / "rank_fault_report.txt",
                                     what="member rank 1")
        worker = harness.wait_for(lambda: both_nodes_ready(client, "tp2"), 30, interval=0.2,
                                  what="describe to show both nodes READY again")
        assert worker["nodes"][1]["pid"] != member_agent and worker["nodes"][1]["ranks"][0]["pid"] != member_rank

        # the whole member goes away (frontend and ranks SIGKILLed) and comes back: it rejoins
        member.kill_all()
        gone = time.monotonic()
        harness.wait_for(lambda: describe(client, "tp2")["workers"][0]["status"] != "READY", 30,
                         what="the leader to notice the member is gone")
        member.start()
        harness.wait_for(lambda: predict(client, rows[0], timeout=60).result().status_code == 200, 240, interval=0.5,
                         what="the job to re-form with the restarted member")
        print(f"member frontend killed and restarted: serving again after {time.monotonic() - gone:.1f} s")
        harness.wait_for(lambda: both_nodes_ready(client, "tp2"), 30, interval=0.2,
                         what="describe to show the restarted member READY")

        # a pipeline-parallel model across the two nodes: one stage each
        r = register(client, "pp2.mar")
        assert r.status_code == 200, r.text + leader.log()[-3000:] + member.log()[-3000:]
        check_answers(client, "pp2", rows)
        nodes = harness.wait_for(lambda: both_nodes_ready(client, "pp2"), 30, interval=0.2,
                                 what="describe to show both nodes READY")["nodes"]
        assert [(n["node"], [r["rank"] for r in n["ranks"]], n["state"]) for n in nodes] == [
            (0, [0], "READY"), (1, [1], "READY")], nodes
        r = client.call("DELETE", f"http://{LEADER_IP}:{MGMT}/models/pp2", timeout=120)
        assert r.status_code == 200, r.text

        # unregistering on the leader stops the member's ranks
        r = client.call("DELETE", f"http://{LEADER_IP}:{MGMT}/models/tp2", timeout=120)
        assert r.status_code == 200, r.text
        assert member_jobs(client) == []
        harness.wait_for(lambda: not member.processes()[1:], 30, what="the member's ranks to exit")
        assert register(client, "tp2.mar").status_code == 200
        stop_both(leader, member)


def test_tp_elastic_with_etcd_rendezvous(tmp_path: Path) -> None:
    """Dynamic mode: a real etcd (v2 API) in the leader's namespace, nnodes 1:2. The member's
    agent is SIGKILLed under load: the job re-forms with the nodes that are there (the leader
    alone, world 1, or with the member's new agent when it joins in time), the leader asks the
    member to rejoin, and the job ends up on both nodes again, answering the same. Then the
    leader's frontend is SIGKILLed (leader_killed_then_restarted)."""
    if ETCD is None:
        pytest.skip("etcd is not installed (Debian's etcd-server package: make apt)")
    probe = subprocess.run([PYTHON, "-c", "import etcd"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("torch's etcd-v2 rendezvous needs the python-etcd client: pip install python-etcd")
    # the docs' config blocks, and node names as on Kubernetes: the etcd rendezvous orders the
    # nodes by these names, so the leader's ranks come first by design
    with two_nodes(tmp_path, {"tpe": TPE_YAML}, etcd=True, documented=True, by_name=True) as (leader, member, client):
        r = register(client, "tpe.mar")
        assert r.status_code == 200, r.text + leader.log()[-3000:] + member.log()[-3000:]
        worker = harness.wait_for(lambda: both_nodes_ready(client, "tpe"), 180, interval=0.5,
                                  what="both nodes in the etcd job")
        assert [r["rank"] for n in worker["nodes"] for r in n["ranks"]] == [0, 1], worker
        rows = inputs(8)
        check_answers(client, "tpe", rows)
        member_agent = worker["nodes"][1]["pid"]
        assert "torch.distributed.run" in cmdline(member_agent)   # the agent, not the rank

        failed, ok, recovery = kill_member_agent_under_load(client, "tpe", rows, member_agent,
                                                           tmp_path / "fault_report.txt")
        check_answers(client, "tpe", rows)   # the leader alone (world 1) answers the same
        log = leader.log()
        assert "torchrun re-forms the job" in log, log[-3000:]

        # the member rejoins by itself (the leader asks it again) and the job re-forms with both
        worker = harness.wait_for(lambda: both_nodes_ready(client, "tpe"), 180, interval=0.5,
                                  what="the member to rejoin the etcd job")
        assert worker["nodes"][1]["pid"] != member_agent
        check_answers(client, "tpe", rows)

        # whether the leader served alone meanwhile depends on when the member's new agent joined;
        # (the whole member going away and coming back: the static test above)
        worlds = [line.rsplit("=", 1)[1] for line in leader.log("model_log.log").splitlines()
                  if "group_world_size=" in line]
        print(f"tpe: rounds of the job (world sizes): {worlds}")
        assert len(worlds) >= 2 and worlds[-1] == "2", worlds
        leader_killed_then_restarted(leader, member, client, rows)
        stop_both(leader, member)


def leader_killed_then_restarted(leader: Node, member: Node, client: Client, rows: list) -> None:
    """The leader's frontend is SIGKILLed: its agent dies with it, the member stops its ranks and
    says why; the restarted leader registers the model on the first try (a fresh etcd run id),
    and again after a `torchserve --stop` and a start."""
    worker = both_nodes_ready(client, "tpe")
    assert worker is not None
    leader_agent = worker["nodes"][0]["pid"]
    assert "torch.distributed.run" in cmdline(leader_agent)
    frontend = leader.pid
    killed = time.monotonic()
    os.kill(frontend, signal.SIGKILL)
    harness.wait_for(lambda: not harness.alive(leader_agent), 10, interval=0.05,
                     what="the leader's torchrun agent to die with its frontend")
    agent_gone = time.monotonic() - killed

    def member_stopped():
        jobs = member_jobs(client)
        return jobs if jobs and jobs[0]["state"] == "FAILED" and not member.processes()[1:] else None

    jobs = harness.wait_for(member_stopped, 30, interval=0.2, what="the member to stop its ranks")
    member_gone = time.monotonic() - killed
    assert "leader" in jobs[0]["failure"] and "lost: no call from it" in jobs[0]["failure"], jobs
    assert "lost: no call from it" in member.log()
    harness.wait_for(lambda: not tagged_processes(frontend), 30, interval=0.2,
                     what="no process of the killed leader left")
    print(f"tpe: leader SIGKILLed: its agent gone after {agent_gone:.2f} s, the member's ranks stopped "
          f"(FAILED, leader lost) after {member_gone:.1f} s")
    assert member_gone < 20   # 8 s of silence, then the stop
    for how in ("SIGKILL", "--stop"):
        begin = time.monotonic()
        leader.start()
        r = register(client, "tpe.mar")
        assert r.status_code == 200, f"after {how}: " + r.text + leader.log()[-3000:]
        harness.wait_for(lambda: both_nodes_ready(client, "tpe"), 180, interval=0.5,
                         what=f"both nodes in the job after the leader's {how} and restart")
        print(f"tpe: leader restarted after {how}: registered on the first try, both nodes READY "
              f"{time.monotonic() - begin:.1f} s after `torchserve --start`")
        check_answers(client, "tpe", rows[:2])
        if how == "SIGKILL":
            out = leader.stop()
            assert out.returncode == 0, out.stdout + out.stderr
            assert member_jobs(client) == []
