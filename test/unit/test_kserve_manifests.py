"""kubernetes/kserve/: the tserve runtime (ClusterServingRuntime and ServingRuntime) and the
InferenceService example are valid against the KServe CRD subset in kserve-crds.schema.json (KServe
publishes no offline schema), their containers against the Kubernetes core schemas, and they hang
together: KServe's TorchServe runtime arguments, the image docs/deploy.md builds, probes that need
no token, and a config.properties tserve accepts."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema", reason="the jsonschema package is not installed (dev extra)")
kv = pytest.importorskip("kubernetes_validate", reason="the kubernetes-validate package is not installed (dev extra)")

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "kubernetes" / "kserve"
SCHEMA = json.loads((ROOT / "kserve-crds.schema.json").read_text())
# KServe's kserve-torchserve runtime starts TorchServe with exactly these arguments
KSERVE_TORCHSERVE_ARGS = ["torchserve", "--start", "--model-store=/mnt/models/model-store",
                          "--ts-config=/mnt/models/config/config.properties"]


def documents() -> list[dict]:
    return [d for p in sorted(ROOT.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def by_kind(kind: str) -> dict:
    (doc,) = [d for d in documents() if d["kind"] == kind]
    return doc


def schema_errors(doc: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def check_container(container: dict) -> None:
    """A container against Kubernetes' own Container schema (strict: unknown fields fail)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check"}, "spec": {"containers": [container]}}
    try:
        kv.validate(pod, kv.latest_version(), strict=True)
    except kv.ValidationError as e:
        pytest.fail(f"container {container.get('name')}: {e.message} at {e.path}")


def test_every_kserve_manifest_is_valid() -> None:
    docs = documents()
    assert sorted(d["kind"] for d in docs) == ["ClusterServingRuntime", "InferenceService", "ServingRuntime"]
    for doc in docs:
        assert schema_errors(doc) == [], f"{doc['kind']} {doc['metadata']['name']}"
        for container in doc["spec"].get("containers", []):
            check_container(container)
    model = by_kind("InferenceService")["spec"]["predictor"]["model"]
    check_container({"name": "kserve-container", "resources": model["resources"]})


def test_the_schema_rejects_what_kserve_rejects() -> None:
    runtime = by_kind("ServingRuntime")
    for break_it in (lambda d: d["spec"].update(supportedModelFormat=[]),           # a misspelt field
                     lambda d: d["spec"].update(protocolVersions=["v3"]),
                     lambda d: d["spec"].pop("containers"),
                     lambda d: d["spec"]["supportedModelFormats"][0].update(priority=0),
                     lambda d: d.update(apiVersion="serving.kserve.io/v1beta1")):
        doc = copy.deepcopy(runtime)
        break_it(doc)
        assert schema_errors(doc), doc
    isvc = copy.deepcopy(by_kind("InferenceService"))
    isvc["spec"]["predictor"]["model"]["modelFormat"] = {"nmae": "pytorch"}
    assert schema_errors(isvc)


def test_runtime_starts_tserve_as_kserve_starts_torchserve() -> None:
    cluster, namespaced = by_kind("ClusterServingRuntime"), by_kind("ServingRuntime")
    assert cluster["spec"] == namespaced["spec"] and cluster["metadata"]["name"] == namespaced["metadata"]["name"]
    (container,) = cluster["spec"]["containers"]
    assert container["name"] == "kserve-container" and container["args"] == KSERVE_TORCHSERVE_ARGS
    # the image docs/deploy.md builds from docker/Dockerfile, whose entry point runs the args
    assert f"-t {container['image']} ." in (REPO / "docs" / "deploy.md").read_text()
    entrypoint = (REPO / "docker" / "entrypoint.sh").read_text()
    assert '"${1:-}" == "torchserve"' in entrypoint and "--foreground" in entrypoint
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["TS_SERVICE_ENVELOPE"] == "{{.Labels.serviceEnvelope}}"
    assert env["TS_INFERENCE_ADDRESS"].endswith(f":{container['ports'][0]['containerPort']}")
    assert env["TS_HEALTH_CHECK_NO_AUTH"] == "true"
    for probe, path in (("readinessProbe", "/v2/health/ready"), ("livenessProbe", "/v2/health/live")):
        assert container[probe]["httpGet"] == {"path": path, "port": container["ports"][0]["containerPort"]}
    formats = {f["name"] for f in cluster["spec"]["supportedModelFormats"]}
    model = by_kind("InferenceService")["spec"]["predictor"]["model"]
    assert model["runtime"] == cluster["metadata"]["name"] and model["modelFormat"]["name"] in formats
    assert model["protocolVersion"] in cluster["spec"]["protocolVersions"]


def test_example_config_is_kserves_layout_and_keys() -> None:
    props = dict(line.split("=", 1) for line in (ROOT / "config.properties").read_text().splitlines()
                 if line and not line.startswith("#"))
    assert props["model_store"] == "/mnt/models/model-store" and props["enable_envvars_config"] == "true"
    snapshot = json.loads(props["model_snapshot"])
    (name,) = snapshot["models"]
    assert name == by_kind("InferenceService")["metadata"]["name"]
    assert snapshot["models"][name]["1.0"]["marName"] == f"{name}.mar"
    for key in props:
        assert re.fullmatch(r"[a-z_]+", key), key
