"""deploy/k8s: the workers' Deployment, its probes and configuration, the PodDisruptionBudget, the migration
Job; the read API's Deployment (api-*.yaml) beside them, with its own read-only database URL.

No cluster here. `kubectl kustomize` renders the kustomization where kubectl is installed; with the
`kubernetes-validate` package installed the manifests are also checked against the Kubernetes API
schemas. The rest is structural, with the configuration run through the worker's own validation.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.deploy.paths import DEPLOY, K8S, load_yaml, load_yaml_all, read_only_role
from worker import config as config_mod

SETTINGS = {f.upper() for f in config_mod.Config.__dataclass_fields__}
API_SETTINGS = {f.upper() for f in config_mod.ServeConfig.__dataclass_fields__}


def manifests(api: bool = False) -> dict[str, dict]:
    """kind -> the one object of that kind in deploy/k8s: the workers' (and the migration's), or with `api`
    the read API's (the files api-*.yaml)."""
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name.startswith("api-") != api:
            continue
        for doc in load_yaml_all(path):
            key = doc["kind"] if not path.name.endswith("secret.example.yaml") else "SecretExample"
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
    kinds = {load_yaml(K8S / r)["kind"] for r in k["resources"] if not r.startswith("api-")}
    assert kinds == {"Namespace", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}
    api = sorted(r for r in k["resources"] if r.startswith("api-"))
    assert api == sorted(p.name for p in K8S.glob("api-*.yaml") if not p.name.endswith("secret.example.yaml"))
    assert {load_yaml(K8S / r)["kind"] for r in api} == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}


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
    docs = list(yaml.safe_load_all(r.stdout))
    k = load_yaml(K8S / "kustomization.yaml")
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == {"rating-worker", "rating-api"}
    for deployment in deployments.values():
        (c,) = deployment["spec"]["template"]["spec"]["containers"]
        assert c["image"] == f"{k['images'][0]['newName']}:{k['images'][0]['newTag']}"
    assert all(d["metadata"].get("namespace", k["namespace"]) == k["namespace"] for d in docs)


def test_manifests_match_the_kubernetes_schemas():
    kv = pytest.importorskip("kubernetes_validate",
                             reason="pip install kubernetes-validate to check deploy/k8s against the API schemas")
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in load_yaml_all(path):
            kv.validate(doc, "1.30", strict=True)


# ---- the read API ---------------------------------------------------------------------------------


def test_the_read_api_deployment_probes_and_runs_like_the_workers():
    m, workers = manifests(api=True), manifests()
    deployment = m["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    c = worker_container(m)
    assert c["args"] == ["serve"]
    assert c["image"] == worker_container(workers)["image"], "the same image, so kustomization's `images` sets both"
    (port,) = c["ports"]
    assert port["containerPort"] == int(m["ConfigMap"]["data"]["API_PORT"]) == config_mod.ServeConfig().api_port
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert c["resources"]["limits"]["memory"]
    pod, worker_pod = deployment["spec"]["template"]["spec"], workers["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"] == worker_pod["securityContext"]
    assert c["securityContext"] == worker_container(workers)["securityContext"]
    assert pod["automountServiceAccountToken"] is False
    # Prometheus finds it as it finds the workers: the pods' annotations, a Service for a ServiceMonitor
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == port["containerPort"]
    assert m["Service"]["metadata"]["name"] == "rating-api", "the job the rules select (job=\"rating-api\")"


def test_the_read_api_selectors_are_its_own():
    m, workers = manifests(api=True), manifests()
    pod_labels = m["Deployment"]["spec"]["template"]["metadata"]["labels"]
    selector = m["Deployment"]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert m["Service"]["spec"]["selector"] == selector == m["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"]
    (port,) = m["Service"]["spec"]["ports"]
    assert port["targetPort"] == worker_container(m)["ports"][0]["name"]
    # neither Deployment's pods match the other's selector (the workers' headless Service, their PDB)
    worker_selector = workers["Deployment"]["spec"]["selector"]["matchLabels"]
    assert not worker_selector.items() <= pod_labels.items()
    assert not selector.items() <= workers["Deployment"]["spec"]["template"]["metadata"]["labels"].items()


def test_the_read_api_reads_its_own_read_only_database_url():
    m, workers = manifests(api=True), manifests()
    c = worker_container(m)
    (source,) = c["envFrom"]
    assert source["configMapRef"]["name"] == m["ConfigMap"]["metadata"]["name"] != workers["ConfigMap"]["metadata"]["name"]
    data = m["ConfigMap"]["data"]
    assert set(data) <= API_SETTINGS, f"not read API settings: {set(data) - API_SETTINGS}"
    secret_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"]}
    assert set(secret_env) <= API_SETTINGS
    assert {"DATABASE_URL", "SUPPORT_TOKEN"} <= set(secret_env) and not {"DATABASE_URL", "SUPPORT_TOKEN"} & set(data)
    secret = m["SecretExample"]
    assert secret["metadata"]["name"] != workers["SecretExample"]["metadata"]["name"], "not the workers' Secret"
    for name, ref in secret_env.items():
        assert ref["name"] == secret["metadata"]["name"] and ref["key"] == name
        assert name in secret["stringData"]
    # what a pod would see passes the API's own validation, as the role the SQL creates
    cfg = config_mod.load_serve(env={**{k: str(v) for k, v in data.items()}, **secret["stringData"]})
    assert cfg.database_url.startswith(f"postgresql://{read_only_role()}:")
    worker_url = workers["SecretExample"]["stringData"]["DATABASE_URL"]
    assert cfg.database_url.split("@")[0] != worker_url.split("@")[0]
