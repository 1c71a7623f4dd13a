"""kubernetes/kserve/: the tserve runtime (ClusterServingRuntime and ServingRuntime) is valid against
KServe's own ServingRuntime CRD schema (vendored in test/unit/data/, source noted there) and replaces
KServe's kserve-torchserve runtime (vendored beside it) one for one; the runtime and the
InferenceService example are valid against the KServe CRD subset in kserve-crds.schema.json, their
containers against the Kubernetes core schemas, and they hang together: KServe's TorchServe runtime
arguments, the image docs/deploy.md builds, probes that need no token, and a config.properties
tserve accepts."""

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
DATA = Path(__file__).resolve().parent / "data"
# spec.versions[v1alpha1].schema.openAPIV3Schema of KServe's ServingRuntime CRD (ClusterServingRuntime: the same)
CRD_SCHEMA = json.loads((DATA / "kserve-servingruntime-v1alpha1.schema.json").read_text())
KSERVE_TORCHSERVE = yaml.safe_load((DATA / "kserve-torchserve.yaml").read_text())
INFERENCE_PORT = 8080   # KServe's default container port, where the runtime puts the inference API
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


def strict(schema: object) -> object:
    """The CRD schema as the API server applies it with strict field validation (kubectl's default since
    1.27): an unknown field is an error rather than silently pruned."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_errors(doc: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(strict(CRD_SCHEMA))
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


def test_runtimes_are_valid_against_kserves_crd_schema() -> None:
    for kind in ("ServingRuntime", "ClusterServingRuntime"):
        assert crd_errors(by_kind(kind)) == [], kind
    assert crd_errors(KSERVE_TORCHSERVE) == []   # the schema reads KServe's own runtime as valid
    broken = copy.deepcopy(by_kind("ServingRuntime"))
    broken["spec"]["supportedModelFormat"] = broken["spec"].pop("supportedModelFormats")   # a misspelt field
    broken["spec"]["containers"][0]["args"] = "torchserve --start"                        # a string, not a list
    assert len(crd_errors(broken)) == 2, crd_errors(broken)


def test_runtime_replaces_kserve_torchserve_one_for_one() -> None:
    ours, theirs = by_kind("ClusterServingRuntime")["spec"], KSERVE_TORCHSERVE["spec"]
    for key in ("supportedModelFormats", "protocolVersions", "annotations"):
        assert ours[key] == theirs[key], key
    (container,), (their_container,) = ours["containers"], theirs["containers"]
    for key in ("name", "args", "securityContext", "resources"):
        assert container[key] == their_container[key], key
    assert "ports" not in container and "ports" not in their_container   # an InferenceService's own ports apply
    their_env = {e["name"]: e["value"] for e in their_container["env"]}
    assert their_env.items() <= {e["name"]: e["value"] for e in container["env"]}.items()
    # nothing else added but the probes (tserve answers them without a token); the image is tserve's
    assert set(ours) == set(theirs) and set(container) - set(their_container) == {"readinessProbe", "livenessProbe"}
    assert container["image"] != their_container["image"]
    props = (ROOT / "config.properties").read_text()
    assert "grpc_inference_port=7070" in props   # grpc-v2: the h2c port an InferenceService names, as with TorchServe


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
    assert env["TS_INFERENCE_ADDRESS"].endswith(f":{INFERENCE_PORT}")
    assert env["TS_HEALTH_CHECK_NO_AUTH"] == "true"
    for probe, path in (("readinessProbe", "/v2/health/ready"), ("livenessProbe", "/v2/health/live")):
        assert container[probe]["httpGet"] == {"path": path, "port": INFERENCE_PORT}
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
