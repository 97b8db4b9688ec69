"""deploy/docker-compose.yml, its topic script and the Prometheus and Grafana files it mounts.

No Docker engine here: the stack is never started by these tests. The compose file is validated
against Compose's schema by `docker compose config` (or Debian's `docker-compose` v1) where a client
is installed, and always checked structurally, with the workers' and the read API's environments run
through their own configuration validation. The read-only role's SQL runs for real in
test_read_only_role.py, the API's health check in test_prometheus_scrape.py.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.deploy.paths import DEPLOY, PROMETHEUS_DIR, load_yaml, read_only_role
from worker import config as config_mod

COMPOSE = DEPLOY / "docker-compose.yml"
TOPICS_SCRIPT = DEPLOY / "kafka" / "create-topics.sh"


def compose() -> dict:
    return load_yaml(COMPOSE)


def interpolate(value: str) -> str:
    """Compose's ${VAR:-default} with the defaults (the environment unset)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def service_env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


def _compose_client() -> list[str] | None:
    if shutil.which("docker"):
        r = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_docker_compose_config_accepts_the_file():
    client = _compose_client()
    if client is None:
        pytest.skip("no Compose client (docker compose plugin, or Debian's docker-compose): "
                    "the file is only checked structurally here")
    r = subprocess.run([*client, "-f", str(COMPOSE), "config", "-q"], cwd=DEPLOY, capture_output=True, text=True,
                       timeout=60, env={**os.environ, "COMPOSE_PROJECT_NAME": "rating-worker"})
    assert r.returncode == 0, r.stdout + r.stderr


def test_docker_compose_config_rejects_a_broken_file(tmp_path):
    """The schema check can fail: a misspelt key is refused."""
    client = _compose_client()
    if client is None:
        pytest.skip("no Compose client (docker compose plugin, or Debian's docker-compose)")
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text().replace("    depends_on:\n      postgres:", "    depend_on:\n      postgres:", 1))
    assert broken.read_text() != COMPOSE.read_text()
    r = subprocess.run([*client, "-f", str(broken), "config", "-q"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0


def test_the_services_the_issue_asks_for():
    services = compose()["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:")
    kafka_env = service_env(services["kafka"])
    assert set(kafka_env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}, "KRaft, no ZooKeeper"
    assert not any("zookeeper" in name for name in services)
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["prometheus"]["image"].startswith("prom/prometheus:")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    assert services["worker"]["deploy"]["replicas"] == 2
    assert services["worker"]["command"] == ["run"]
    assert services["migrate"]["command"] == ["migrate"]
    assert services["api"]["command"] == ["serve"]
    for name in ("worker", "migrate", "api"):
        build = services[name]["build"]
        assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_images_are_pinned():
    for name, service in compose()["services"].items():
        image = service["image"]
        if "build" in service:
            continue
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and re.search(r"\d", tag), f"{name}: pin {image!r} to a version"


def test_startup_order_and_health():
    services = compose()["services"]
    for name, service in services.items():
        deps = service.get("depends_on") or {}
        for dep, how in (deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps)):
            assert dep in services, f"{name} depends on an unknown service {dep}"
            assert how.get("condition", "service_started") in (
                "service_started", "service_healthy", "service_completed_successfully")
    worker = services["worker"]["depends_on"]
    assert worker["kafka-topics"]["condition"] == "service_completed_successfully"
    assert worker["migrate"]["condition"] == "service_completed_successfully"
    assert services["kafka-topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("kafka", "postgres"):
        assert services[name]["healthcheck"]["test"], name
    # the worker's own health check is the image's (deploy/Dockerfile HEALTHCHECK)
    assert "healthcheck" not in services["worker"]
    assert int(str(services["worker"]["stop_grace_period"]).rstrip("s")) >= 30


def test_mounted_files_exist_and_named_volumes_are_declared():
    doc = compose()
    declared = set(doc.get("volumes") or {})
    for name, service in doc["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (COMPOSE.parent / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in declared, f"{name}: named volume {source} is not declared"


def test_the_workers_environment_is_a_valid_worker_configuration():
    services = compose()["services"]
    env = service_env(services["worker"])
    cfg = config_mod.load(env=env)  # raises ConfigError naming the setting
    assert cfg.kafka_bootstrap_servers.split(":")[0] == "kafka"
    assert cfg.database_url.split("@")[1].split(":")[0] == "postgres"
    assert service_env(services["migrate"])["DATABASE_URL"] == env["DATABASE_URL"]
    known = {f.upper() for f in config_mod.Config.__dataclass_fields__}
    assert set(env) <= known, f"unknown settings: {set(env) - known}"


def api_healthcheck_url() -> str:
    test = compose()["services"]["api"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    (url,) = re.findall(r"'(http://[^']+)'", test[3])
    return url


def test_the_read_api_serves_as_the_read_only_role():
    services = compose()["services"]
    api = services["api"]
    env = service_env(api)
    cfg = config_mod.load_serve(env=env)  # raises ConfigError naming the setting
    known = {f.upper() for f in config_mod.ServeConfig.__dataclass_fields__}
    assert set(env) <= known, f"unknown settings: {set(env) - known}"
    # the role the SQL creates at PostgreSQL's first start, with the password PostgreSQL is given for it
    reader = read_only_role()
    url, worker_url = urlsplit(cfg.database_url), urlsplit(service_env(services["worker"])["DATABASE_URL"])
    assert url.username == reader == "rating_reader" != worker_url.username
    assert url.password == service_env(services["postgres"])["RATING_READER_PASSWORD"]
    assert (url.hostname, url.port, url.path) == (worker_url.hostname, worker_url.port, worker_url.path)
    mounts = dict(v.split(":")[:2] for v in services["postgres"]["volumes"] if v.startswith("./"))
    target = mounts["./postgres/read-only-role.sql"]
    assert target.startswith("/docker-entrypoint-initdb.d/") and target.endswith(".sql")
    # its port published, its probe on /readyz at that port, after the migration
    assert f"127.0.0.1:{cfg.api_port}:{cfg.api_port}" in api["ports"]
    assert cfg.api_port == config_mod.ServeConfig().api_port
    assert api_healthcheck_url() == f"http://127.0.0.1:{cfg.api_port}/readyz"
    assert api["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "deploy" not in api or api["deploy"].get("replicas", 1) == 1, "one replica per published port"


def test_prometheus_scrapes_the_read_api():
    services = compose()["services"]
    prom = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == "rating-api"]
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == ["api"] and "api" in services
    assert sd["port"] == int(service_env(services["api"])["API_PORT"])
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert 'job="rating-api"' in (PROMETHEUS_DIR / "rules.yml").read_text()


def run_topic_script(tmp_path: Path, **env: str) -> dict[str, int]:
    """Run create-topics.sh with a stand-in for kafka-topics.sh; returns the topics it creates."""
    calls = tmp_path / "calls"
    stub = tmp_path / "kafka-topics.sh"
    stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{calls}"\n')
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    r = subprocess.run(["sh", str(TOPICS_SCRIPT)], capture_output=True, text=True, timeout=30,
                       env={"PATH": os.environ["PATH"], "KAFKA_TOPICS_BIN": str(stub), **env})
    assert r.returncode == 0, r.stderr
    created = {}
    lines = calls.read_text().splitlines()
    for line in lines:
        if "--create" in line:
            args = line.split()
            assert "--if-not-exists" in args, "re-running the script must not fail"
            created[args[args.index("--topic") + 1]] = int(args[args.index("--partitions") + 1])
            assert args[args.index("--bootstrap-server") + 1] == env.get("KAFKA_BOOTSTRAP_SERVERS", "kafka:9092")
    describe = [line for line in lines if "--describe" in line]
    assert len(describe) == 1
    pattern = describe[0].split("--topic ")[1]
    assert all(re.fullmatch(pattern, t) for t in created), "the final --describe shows every topic"
    return created


def test_topic_script_creates_every_topic_the_worker_uses(tmp_path):
    created = run_topic_script(tmp_path)
    cfg = config_mod.load(env=service_env(compose()["services"]["worker"]))
    assert set(created) == {*cfg.kafka_input_topics, cfg.kafka_output_topic, cfg.kafka_dlq_topic}
    defaults = config_mod.Config()
    assert set(created) == {*defaults.kafka_input_topics, defaults.kafka_output_topic, defaults.kafka_dlq_topic}


def test_partition_counts_let_every_replica_work(tmp_path):
    """A consumer group gives each partition to one worker: the busiest input topic (game.finished)
    needs at least as many partitions as there are workers, here and in the Kubernetes Deployment."""
    created = run_topic_script(tmp_path)
    cfg = config_mod.Config()
    busiest = created[cfg.kafka_input_topics[0]]
    replicas = [compose()["services"]["worker"]["deploy"]["replicas"]]
    k8s = load_yaml(DEPLOY / "k8s" / "deployment.yaml")
    replicas.append(k8s["spec"]["replicas"])
    assert busiest >= max(replicas) * 2, "room to scale out beyond the replicas shipped"
    assert all(n >= 1 for n in created.values())
    assert created[cfg.kafka_output_topic] >= busiest, "rating.changed consumers scale as far as the workers"
    # the counts are settings
    other = tmp_path / "other"
    other.mkdir()
    created = run_topic_script(other, GAMES_PARTITIONS="48", KAFKA_BOOTSTRAP_SERVERS="b:1")
    assert created[cfg.kafka_input_topics[0]] == 48


def test_prometheus_scrapes_every_worker_replica():
    services = compose()["services"]
    prom = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == "rating-worker"]
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == ["worker"] and "worker" in services
    port = int(service_env(services["worker"])["METRICS_PORT"])
    assert sd["port"] == port == config_mod.Config().metrics_port
    assert job.get("metrics_path", "/metrics") == "/metrics"
    # the files Prometheus is given are the ones the config names
    mounts = dict(v.split(":")[:2] for v in services["prometheus"]["volumes"] if v.startswith("./"))
    assert mounts["./prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    for rule_file in prom["rule_files"]:
        assert mounts[f"./prometheus/{rule_file}"] == f"/etc/prometheus/{rule_file}"
    # the rules select this job
    assert 'job="rating-worker"' in (PROMETHEUS_DIR / "rules.yml").read_text()


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard():
    services = compose()["services"]
    mounts = dict(v.split(":")[:2] for v in services["grafana"]["volumes"] if v.startswith("./"))
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    provisioning = DEPLOY / "grafana" / "provisioning"
    (ds,) = load_yaml(provisioning / "datasources" / "prometheus.yml")["datasources"]
    assert ds["type"] == "prometheus"
    host, port = ds["url"].removeprefix("http://").split(":")
    assert host == "prometheus" and host in services
    assert any(p.endswith(f":{port}") for p in services["prometheus"]["ports"])
    (provider,) = load_yaml(provisioning / "dashboards" / "rating-worker.yml")["providers"]
    dashboards_dir = [src for src, dst in mounts.items() if dst == provider["options"]["path"]]
    assert dashboards_dir == ["./grafana/dashboards"]
    assert (DEPLOY / "grafana" / "dashboards" / "rating-worker.json").exists()
    home = service_env(services["grafana"])["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/rating-worker.json"


def test_the_game_docs_deploy_sends_is_a_valid_message():
    """docs/deploy.md shows how to send a game to the Compose stack: it must decode as the worker does."""
    from worker.contract.decode import decode

    doc = (DEPLOY.parent / "docs" / "deploy.md").read_text()
    lines = [line for line in doc.splitlines() if line.startswith('{"specversion"')]
    assert lines, "no example message in docs/deploy.md"
    for line in lines:
        assert decode(line.encode()).type == "game.finished"
