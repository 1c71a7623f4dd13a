"""tserve started exactly as KServe's runtime starts it (kubernetes/kserve/servingruntime.yaml: the
args and env of kserve-container, run by the image's entry point), on a /mnt/models-style layout
(config/config.properties = kubernetes/kserve/config.properties, model-store/adder.mar), moved to a
temporary folder and to free 127.0.0.1 ports; it predicts over KServe v1 and v2, with the envelope
KServe sets through TS_SERVICE_ENVELOPE and the probes open without a token."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import yaml

import harness

pytestmark = pytest.mark.slow

KSERVE = harness.REPO / "kubernetes" / "kserve"
ADDRESS_KEYS = {"TS_INFERENCE_ADDRESS", "TS_MANAGEMENT_ADDRESS", "TS_METRICS_ADDRESS"}


def runtime_container() -> dict:
    (doc,) = [d for d in yaml.safe_load_all((KSERVE / "servingruntime.yaml").read_text()) if d["kind"] == "ServingRuntime"]
    (container,) = doc["spec"]["containers"]
    return container


@pytest.fixture(scope="module")
def mnt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """<tmp>/mnt/models with model-store/adder.mar; config/ is written per server."""
    root = tmp_path_factory.mktemp("kserve-runtime") / "mnt" / "models"
    harness.build_mar(root / "model-store", "adder", harness.REPO / "examples" / "kserve" / "adder_handler.py")
    return root


class KServePod:
    """The runtime's container process: entry point + args + env from the manifest."""

    def __init__(self, mnt: Path, workdir: Path, envelope: str, token_auth: bool) -> None:
        self.ports = harness.server_config(mnt)
        container = runtime_container()
        lines = []
        for line in (KSERVE / "config.properties").read_text().splitlines():
            key = line.split("=", 1)[0]
            if key in ("grpc_inference_port", "grpc_management_port"):
                line = f"{key}={self.ports[key]}"
            elif key in ("inference_address", "management_address"):   # one port for both, as in KServe's file
                line = f"{key}={self.ports['inference_address']}"
            elif key == "metrics_address":
                line = f"{key}={self.ports[key]}"
            elif key == "disable_token_authorization" and token_auth:
                continue
            lines.append(line.replace("/mnt/models", str(mnt)))
        lines.append(f"initial_worker_port={self.ports['initial_worker_port']}")
        (mnt / "config").mkdir(exist_ok=True)
        (mnt / "config" / "config.properties").write_text("\n".join(lines) + "\n")
        # the manifest's env: KServe fills the label template; the addresses move to free local ports
        self.inference = f"http://127.0.0.1:{harness.free_port()}"
        self.management = f"http://127.0.0.1:{harness.free_port()}"
        moved = {"TS_INFERENCE_ADDRESS": self.inference, "TS_MANAGEMENT_ADDRESS": self.management,
                 "TS_METRICS_ADDRESS": self.ports["metrics_address"]}
        env = {e["name"]: e["value"] for e in container["env"]}
        assert set(moved) <= set(env) and env["TS_SERVICE_ENVELOPE"] == "{{.Labels.serviceEnvelope}}"
        env.update(moved, TS_SERVICE_ENVELOPE=envelope)
        self.args = [a.replace("/mnt/models", str(mnt)) for a in container["args"]]
        self.workdir = workdir
        workdir.mkdir(parents=True)
        (workdir / "tmp").mkdir()
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("TS_") and k not in ("LOG_LOCATION", "METRICS_LOCATION")},
                    **env, "TORCHSERVE": f"{sys.executable} -m ts.model_server", "TMPDIR": str(workdir / "tmp")}
        self.out = workdir / "container.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> KServePod:
        with open(self.out, "wb") as log:
            self.proc = subprocess.Popen([str(harness.REPO / "docker" / "entrypoint.sh"), *self.args], cwd=self.workdir,
                                         env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        harness.wait_for(lambda: self.proc.poll() is not None or "Model server started." in self.text(), 120,
                         what="the runtime's server")
        assert self.proc.poll() is None, self.text()   # --start did not detach: the server is the container's process
        return self

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def tail(self) -> str:
        """The container log's end, for a failure message (why a model is missing or unhealthy)."""
        return self.text()[-4000:]

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)   # the kubelet stopping the pod
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def test_v1_predict_with_kserves_config_and_snapshot(mnt: Path, tmp_path: Path) -> None:
    with KServePod(mnt, tmp_path / "v1", "kserve", token_auth=False) as pod:
        assert "Unknown configuration key" not in pod.text(), pod.text()
        r = requests.post(f"{pod.inference}/v1/models/adder:predict", json={"instances": [[1, 2], [3, 4, 5]]}, timeout=60)
        assert r.status_code == 200 and r.json() == {"predictions": [3, 12]}, r.text + pod.tail()
        for url in (pod.inference, pod.management):
            r = requests.get(f"{url}/v1/models/adder", timeout=30)
            # KServe's readiness fields (on the inference port the answer is also OpenAI's model object)
            assert r.status_code == 200 and {k: r.json()[k] for k in ("name", "ready")} == {"name": "adder", "ready": True}
        # model_snapshot's scale, batching and timeout, applied at startup
        (d,) = requests.get(f"{pod.management}/models/adder", timeout=30).json()
        assert (d["minWorkers"], d["maxWorkers"], d["batchSize"], d["maxBatchDelay"], d["responseTimeout"], d["jobQueueSize"]) == (
            1, 5, 1, 10, 120, 10)
        assert d["loadedAtStartup"] is True
        # TS_* variables override the file (enable_envvars_config=true): its shared port is not bound
        shared = pod.ports["inference_address"]
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{shared}/ping", timeout=5)
    assert pod.proc.returncode == 0, pod.text()


def test_v2_infer_with_token_auth_and_open_probes(mnt: Path, tmp_path: Path) -> None:
    with KServePod(mnt, tmp_path / "v2", "kservev2", token_auth=True) as pod:
        for path in ("/ping", "/v2/health/live", "/v2/health/ready", "/v2/models/adder/ready", "/v1/models/adder"):
            r = requests.get(pod.inference + path, timeout=30)
            assert r.status_code == 200, (path, r.status_code, r.text, pod.tail())
        body = {"id": "7", "inputs": [{"name": "input-0", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
        assert requests.post(f"{pod.inference}/v2/models/adder/infer", json=body, timeout=30).status_code == 401
        assert requests.get(f"{pod.management}/models", timeout=30).status_code == 401
        key = json.loads((pod.workdir / "key_file.json").read_text())["inference"]["key"]
        r = requests.post(f"{pod.inference}/v2/models/adder/infer", json=body, headers={"Authorization": f"Bearer {key}"},
                          timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["outputs"] == [{"name": "input-0", "shape": [2, 2], "datatype": "FP32", "data": [2.0, 4.0, 6.0, 8.0]}]
        assert r.json()["id"] == "7" and r.json()["model_name"] == "adder"
