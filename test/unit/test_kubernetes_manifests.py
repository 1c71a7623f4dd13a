"""kubernetes/: the two-node deployment is valid against the Kubernetes schemas (the offline
schemas the kubernetes-validate package ships) and hangs together: leader = pod 0 of a
StatefulSet behind a headless Service, GPU requests, a readiness probe that waits for the job,
the etcd variant, and configuration files tserve accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

kv = pytest.importorskip("kubernetes_validate", reason="the kubernetes-validate package is not installed (dev extra)")

ROOT = Path(__file__).resolve().parents[2] / "kubernetes"
MANIFESTS = sorted(ROOT.rglob("*.yaml"))


def documents() -> list[tuple[Path, dict]]:
    """Kubernetes' own kinds; KServe's (serving.kserve.io) are checked by test_kserve_manifests.py."""
    return [(p, d) for p in MANIFESTS for d in yaml.safe_load_all(p.read_text())
            if d and not d["apiVersion"].startswith("serving.kserve.io/")]


def by_kind(kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == kind}


def test_every_manifest_is_valid_against_the_kubernetes_schemas() -> None:
    assert MANIFESTS, "no manifests under kubernetes/"
    version = kv.latest_version()
    for path, doc in documents():
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as e:
            pytest.fail(f"{path.relative_to(ROOT)}: {doc['kind']} {doc['metadata']['name']}: {e.message} at {e.path}")


def test_leader_is_pod_zero_behind_a_headless_service_with_one_gpu_each() -> None:
    sts = by_kind("StatefulSet")["tserve"]
    svc = by_kind("Service")
    headless = svc[sts["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert sts["spec"]["replicas"] == 2 and sts["spec"]["podManagementPolicy"] == "Parallel"
    assert svc["tserve-inference"]["spec"]["selector"] == {"statefulset.kubernetes.io/pod-name": "tserve-0"}
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["readinessProbe"]["exec"]["command"] == ["python3", "/etc/tserve/ready.py"]
    mounts = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert mounts["config"]["configMap"]["name"] in by_kind("ConfigMap")
    assert mounts["models"]["persistentVolumeClaim"]["claimName"] in by_kind("PersistentVolumeClaim")


def test_configuration_files_are_what_tserve_reads() -> None:
    data = by_kind("ConfigMap")["tserve-multinode"]["data"]
    leader = dict(line.split("=", 1) for line in data["leader.properties"].splitlines() if line)
    member = dict(line.split("=", 1) for line in data["member.properties"].splitlines() if line)
    assert leader["cluster_members"] == "tserve-1.tserve:8081" and "cluster_leader" not in leader
    assert member["cluster_leader"] == "tserve-0.tserve:8081" and "cluster_members" not in member
    # the leader by design: ordinal 0's stable DNS name, which sorts first among the pods' names
    # (torchrun's etcd rendezvous orders nodes by this address as a string)
    assert leader["cluster_address"] == member["cluster_address"] == "$$HOSTNAME$$.tserve"
    names = [f"tserve-{i}.tserve" for i in range(12)]
    assert sorted(names)[0] == "tserve-0.tserve"
    assert 'ordinal="${HOSTNAME##*-}"' in data["start.sh"] and 'if [ "$ordinal" = 0 ]' in data["start.sh"]
    assert "--member-of tserve-0.tserve:8081" in data["start.sh"]
    for script in ("ready.py", "wait_members.py"):
        compile(data[script], script, "exec")
    static = yaml.safe_load(data["model-config.yaml"])["torchrun"]
    assert static["rdzv-backend"] == "static" and static["rdzv-endpoint"].startswith("tserve-0.tserve:")
    elastic = yaml.safe_load(data["model-config-etcd.yaml"])["torchrun"]
    assert elastic["nnodes"] == "1:2" and elastic["rdzv-backend"] == "etcd-v2"
    etcd = by_kind("StatefulSet")["tserve-etcd"]["spec"]["template"]["spec"]["containers"][0]
    assert "--enable-v2" in etcd["command"]
    assert elastic["rdzv-endpoint"] == f"{by_kind('Service')['tserve-etcd']['metadata']['name']}:2379"


def test_image_tags_are_the_ones_docs_deploy_builds() -> None:
    """Every tserve image is a tag docs/deploy.md builds (tserve:cpu, tserve:cuda); pods that ask for
    GPUs run the CUDA one."""
    deploy = (ROOT.parent / "docs" / "deploy.md").read_text()
    built = {"tserve:cpu", "tserve:cuda"}
    assert all(tag in deploy for tag in built)
    images = []
    for path, doc in [(p, d) for p in MANIFESTS for d in yaml.safe_load_all(p.read_text()) if d]:
        spec = doc.get("spec", {})
        pod = spec.get("template", {}).get("spec", spec)
        for c in pod.get("containers", []):
            if c.get("image", "").startswith("tserve"):
                images.append((path.name, c["image"]))
                assert c["image"] in built, (path, c["image"])
                gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
                assert (c["image"] == "tserve:cuda") == bool(gpus), (path, c["image"], gpus)
    assert {name for name, _ in images} >= {"statefulset.yaml", "servingruntime.yaml"}, images
