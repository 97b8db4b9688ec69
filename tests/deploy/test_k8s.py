"""deploy/k8s: the Deployment, its probes and configuration, the PodDisruptionBudget, the migration Job.

No cluster here. `kubectl kustomize` renders the kustomization where kubectl is installed; with the
`kubernetes-validate` package installed the manifests are also checked against the Kubernetes API
schemas. The rest is structural, with the configuration run through the worker's own validation.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.deploy.paths import DEPLOY, K8S, load_yaml, load_yaml_all
from worker import config as config_mod

SETTINGS = {f.upper() for f in config_mod.Config.__dataclass_fields__}


def manifests() -> dict[str, dict]:
    """kind -> the one object of that kind in deploy/k8s."""
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in load_yaml_all(path):
            key = doc["kind"] if path.name != "secret.example.yaml" else "SecretExample"
            assert key not in out, f"two {key} objects"
            out[key] = doc
    return out


def worker_container(m: dict) -> dict:
    (c,) = m["Deployment"]["spec"]["template"]["spec"]["containers"]
    return c


def test_kustomization_lists_the_files_and_leaves_out_the_job_and_the_example_secret():
    k = load_yaml(K8S / "kustomization.yaml")
    for resource in k["resources"]:
        assert (K8S / resource).exists(), resource
    assert "migrate-job.yaml" not in k["resources"] and "secret.example.yaml" not in k["resources"]
    kinds = {load_yaml(K8S / r)["kind"] for r in k["resources"]}
    assert kinds == {"Namespace", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}


def test_probes_on_healthz_and_readyz_at_the_metrics_port():
    m = manifests()
    c = worker_container(m)
    (port,) = c["ports"]
    assert port["containerPort"] == int(m["ConfigMap"]["data"]["METRICS_PORT"]) == config_mod.Config().metrics_port
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    # a database outage makes /readyz 503 for as long as it lasts: that must not restart the pod
    assert c["livenessProbe"]["httpGet"]["path"] != c["readinessProbe"]["httpGet"]["path"]


def test_resources_security_and_shutdown():
    m = manifests()
    c = worker_container(m)
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert c["resources"]["limits"]["memory"]
    pod = m["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    uid = re.search(r"^USER (\d+)", dockerfile, re.M).group(1)
    assert pod["securityContext"]["runAsUser"] == int(uid), "the image's user"
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["terminationGracePeriodSeconds"] >= 30, "time to finish the batch in hand after SIGTERM"
    assert c["args"] == ["run"]


def test_configuration_comes_from_the_environment_and_secrets():
    m = manifests()
    c = worker_container(m)
    (source,) = c["envFrom"]
    assert source["configMapRef"]["name"] == m["ConfigMap"]["metadata"]["name"]
    data = m["ConfigMap"]["data"]
    assert set(data) <= SETTINGS, f"not worker settings: {set(data) - SETTINGS}"
    secret_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"]}
    assert set(secret_env) <= SETTINGS
    assert "DATABASE_URL" in secret_env and "DATABASE_URL" not in data, "the database URL holds a password"
    for name, ref in secret_env.items():
        assert ref["name"] == m["SecretExample"]["metadata"]["name"] and ref["key"] == name
        assert name in m["SecretExample"]["stringData"]
    # what a pod would see passes the worker's own validation
    env = {**{k: str(v) for k, v in data.items()}, **m["SecretExample"]["stringData"]}
    cfg = config_mod.load(env=env)
    assert cfg.db_pool_size >= cfg.max_inflight_batches + 2
    # the watchdog is set where an operator sees it, on, and left to the Deployment to restart the pod
    assert "WATCHDOG_TIMEOUT_S" in data and cfg.watchdog_timeout_s > cfg.db_command_timeout_s
    assert m["Deployment"]["spec"]["template"]["spec"].get("restartPolicy", "Always") == "Always"
    # mounted files named in the settings are mounted
    mounts = [v["mountPath"] for v in c["volumeMounts"]]
    for name in ("KAFKA_SSL_CAFILE", "KAFKA_SSL_CERTFILE", "KAFKA_SSL_KEYFILE"):
        if data.get(name):
            assert any(data[name].startswith(p + "/") for p in mounts), name


def test_selectors_match_the_pods():
    m = manifests()
    pod_labels = m["Deployment"]["spec"]["template"]["metadata"]["labels"]
    selector = m["Deployment"]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert m["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == selector
    assert m["Service"]["spec"]["selector"].items() <= pod_labels.items()
    assert m["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
    (port,) = m["Service"]["spec"]["ports"]
    assert port["targetPort"] == worker_container(m)["ports"][0]["name"]
    # Prometheus Operator names the job after the Service: the rules select job="rating-worker"
    assert m["Service"]["metadata"]["name"] == "rating-worker"


def test_migration_job_runs_migrate_with_the_same_image_and_secret():
    m = manifests()
    job = m["Job"]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["args"] == ["migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    k = load_yaml(K8S / "kustomization.yaml")
    (image,) = k["images"]
    assert image["name"] == worker_container(m)["image"]
    assert c["image"] == f"{image['newName']}:{image['newTag']}"
    (env,) = c["env"]
    assert env["name"] == "DATABASE_URL"
    assert env["valueFrom"]["secretKeyRef"] == {"name": "rating-worker", "key": "DATABASE_URL"}
    assert job["metadata"]["namespace"] == k["namespace"]


def test_kubectl_kustomize_renders():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kustomization is only checked structurally")
    r = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    yaml = pytest.importorskip("yaml")
    docs = {d["kind"]: d for d in yaml.safe_load_all(r.stdout)}
    (c,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    k = load_yaml(K8S / "kustomization.yaml")
    assert c["image"] == f"{k['images'][0]['newName']}:{k['images'][0]['newTag']}"
    assert all(d["metadata"].get("namespace", k["namespace"]) == k["namespace"] for d in docs.values())


def test_manifests_match_the_kubernetes_schemas():
    kv = pytest.importorskip("kubernetes_validate",
                             reason="pip install kubernetes-validate to check deploy/k8s against the API schemas")
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in load_yaml_all(path):
            kv.validate(doc, "1.30", strict=True)
