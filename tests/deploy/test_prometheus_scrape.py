"""A real Prometheus (Debian's package) scrapes a running worker and a running read API with
deploy/prometheus/rules.yml loaded.

The worker runs as a subprocess against the integration tests' PostgreSQL and broker, rates games and
dead-letters one bad message; `rating-worker serve` reads the same database and answers a few requests.
Then: every metric the worker and the API register is in Prometheus, the recording rules return data,
every rule evaluates without error, the dead-letter alert fires for the bad message, every dashboard query
is accepted by Prometheus (and the main ones return data), and the image's HEALTHCHECK command succeeds
against the worker and against the API, as does Compose's health check of the API.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.deploy.paths import INSTALL_HINT, PROMETHEUS_DIR, need
from tests.deploy.promql import api_series, exported_series
from tests.deploy.test_compose import compose
from tests.deploy.test_dockerfile import healthcheck_command
from tests.deploy.test_metrics_used import dashboard_queries
from tests.integration.harness import WorkerProcess, produce, wait_processed, worker_env
from worker.config import ServeConfig
from worker.dev.api import ApiServer
from worker.dev.streams import games, player_of

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(240),
    # before the fixtures start PostgreSQL and the broker for nothing
    pytest.mark.skipif(shutil.which("prometheus") is None, reason=f"prometheus is not installed: {INSTALL_HINT}"),
]

JOB, API_JOB = re.findall(r"job_name:\s*(\S+)", (PROMETHEUS_DIR / "prometheus.yml").read_text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


class Prometheus:
    def __init__(self, tmp_path, targets: dict[str, str]) -> None:
        """targets: job name -> host:port"""
        binary = need("prometheus")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {PROMETHEUS_DIR / 'rules.yml'}\n"
            "scrape_configs:\n" + "".join(f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
                                           for job, target in targets.items()))
        self.log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "prometheus exited"
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus did not become ready")

    def query(self, expr: str) -> dict:
        """The query API's whole answer ({"status": ..., "data": ...} or the error)."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            return get_json(url)
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read())

    def vector(self, expr: str) -> list[dict]:
        answer = self.query(expr)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def poll(what: str, fetch, timeout: float = 60):
    """fetch() until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        result = fetch()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def wait_serving(port: int, log_path, worker: WorkerProcess, timeout: float = 60) -> None:
    def fetch():
        assert worker.proc.poll() is None, "worker exited:\n" + log_path.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, ConnectionError):
            return False
    poll("the worker's /healthz", fetch, timeout)


# Series a healthy worker does not have: they appear when what they report happens.
ONLY_WHILE_IT_HAPPENS = {
    "rating_worker_unreadable_offset": "a partition stopped at a record the worker cannot read "
                                       "(tests/integration/test_no_record_skipped.py reads it)",
}


async def test_real_prometheus_scrapes_a_running_worker(tmp_path, database_url, broker, topics):
    need("prometheus")
    port = free_port()  # METRICS_PORT=0 would turn the metrics server off
    env = worker_env(database_url, broker, topics, metrics_host="127.0.0.1", metrics_port=port)
    log_path = tmp_path / "worker.log"
    worker = WorkerProcess(env, log_path)
    api = ApiServer(database_url, tmp_path / "api.log")
    prom = None
    try:
        wait_serving(port, log_path, worker)
        api.start()
        prom = Prometheus(tmp_path, {JOB: f"127.0.0.1:{port}", API_JOB: f"127.0.0.1:{api.port}"})
        prom.wait_ready()

        first = games(200, players=20, seed=3, source="/deploy/first")
        await produce(broker.bootstrap_servers, topics.input, first + [b"not json"], key_of=None)
        assert await wait_processed(database_url, 200, timeout=60) == 200
        poll("the first scrape with messages", lambda: prom.vector("rating_worker_messages_total"))
        second = games(200, players=20, seed=4, source="/deploy/second")
        await produce(broker.bootstrap_servers, topics.input, second, key_of=player_of)
        assert await wait_processed(database_url, 400, timeout=60) == 400

        # the target is up, and everything the worker registers reached Prometheus (but the series that
        # exist only while what they report happens)
        assert [s["value"][1] for s in prom.vector(f'up{{job="{JOB}"}}')] == ["1"]
        expected = set(exported_series()) - set(ONLY_WHILE_IT_HAPPENS)

        def missing():
            names = set(get_json(prom.url + "/api/v1/label/__name__/values")["data"])
            return expected - names or None
        try:
            poll("every exported metric", lambda: not missing(), timeout=30)
        except AssertionError:
            raise AssertionError(f"not scraped: {sorted(missing() or ())}") from None

        # a recording rule returns real data: messages applied per second
        applied = poll("rating_worker:messages:rate5m > 0", lambda: prom.vector(
            'rating_worker:messages:rate5m{outcome="applied", type="game.finished"} > 0'))
        assert applied[0]["metric"]["job"] == JOB
        for record in ("rating_worker:consumer_lag:sum", "rating_worker:batch_duration_seconds:p99_5m",
                       "rating_worker:event_lag_seconds:p99_5m"):
            poll(record, lambda r=record: prom.vector(r))

        # every rule evaluates without error (e.g. no many-to-many matching against real labels)
        def evaluated():
            groups = get_json(prom.url + "/api/v1/rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            return rules if all(r.get("lastEvaluation", "").startswith("2") and r["health"] != "unknown"
                                for r in rules) else None
        rules = poll("every rule evaluated", evaluated)
        assert {r["name"]: r["health"] for r in rules if r["health"] != "ok"} == {}
        assert len(rules) == len(re.findall(r"^\s+- (?:record|alert):", (PROMETHEUS_DIR / "rules.yml").read_text(),
                                            re.M))

        # the bad message: the dead-letter alert fires, for its class (the first of a new series)
        def dead_letter_alerts():
            alerts = get_json(prom.url + "/api/v1/alerts")["data"]["alerts"]
            return [a for a in alerts if a["labels"]["alertname"] == "RatingWorkerDeadLetters"
                    and a["state"] == "firing"]
        (alert,) = poll("RatingWorkerDeadLetters firing", dead_letter_alerts)
        assert alert["labels"]["error_class"] == "invalid_json"
        firing = {a["labels"]["alertname"] for a in get_json(prom.url + "/api/v1/alerts")["data"]["alerts"]}
        assert not firing & {"RatingWorkerDown", "RatingWorkerAbsent", "RatingWorkerNotReady", "RatingApiDown",
                             "RatingApiNotReady", "RatingApiErrors"}

        check_the_read_api(prom, api)

        # the dashboard: Prometheus accepts every query, and the main panels show data
        answers = {(title, expr): prom.query(expr) for title, expr in dashboard_queries()}
        errors = {k: v.get("error") for k, v in answers.items() if v["status"] != "success"}
        assert errors == {}
        with_data = {title for (title, _), v in answers.items() if v["data"]["result"]}
        assert {"Workers up", "Workers ready", "Messages/s by outcome", "Rating changes published/s",
                "Batch duration", "Consumer lag by topic", "Dead letters in range",
                "API requests/s by route and status", "API latency by route (p50, p99)"} <= with_data

        # the image's HEALTHCHECK command, against this worker and against a closed port
        hc = healthcheck_command()
        assert hc[0] == "python"

        def healthcheck(metrics_port: int, api_port: int) -> int:
            env = {**os.environ, "METRICS_PORT": str(metrics_port), "API_PORT": str(api_port)}
            return subprocess.run([sys.executable, *hc[1:]], env=env, capture_output=True, timeout=30).returncode

        closed = free_port()
        assert healthcheck(port, closed) == 0, "the worker's container"
        assert healthcheck(closed, api.port) == 0, "the read API's container"
        assert healthcheck(closed, free_port()) != 0
        # Compose's own health check of the API (its /readyz), at this API's port
        cmd = compose()["services"]["api"]["healthcheck"]["test"]
        assert cmd[:2] == ["CMD", "python"]
        script = cmd[-1].replace(f"127.0.0.1:{ServeConfig().api_port}/", f"127.0.0.1:{api.port}/")
        assert script != cmd[-1]
        ready = subprocess.run([sys.executable, *cmd[2:-1], script], capture_output=True, timeout=30)
        assert ready.returncode == 0, ready.stderr
    finally:
        if prom is not None:
            prom.stop()
        api.stop()
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0


def check_the_read_api(prom: Prometheus, api: ApiServer) -> None:
    """A few requests to the API: its metrics reach Prometheus under the names and labels the rules use."""
    for path, status in (("/v1/players/nobody", 404), ("/v1/leaderboards/csr/blitz", 200), ("/readyz", 200)):
        try:
            with urllib.request.urlopen(api.url + path, timeout=10) as resp:
                assert resp.status == status, path
        except urllib.error.HTTPError as exc:
            assert exc.code == status, path
    selector = f'rating_api_requests_total{{job="{API_JOB}", route="/v1/players/{{player_id}}", status="404"}}'
    (sample,) = poll("the API's requests in Prometheus", lambda: prom.vector(selector))
    assert sample["value"][1] == "1"
    assert prom.vector(f'rating_api_request_seconds_bucket{{job="{API_JOB}", route="/readyz"}}')
    names = set(get_json(prom.url + "/api/v1/label/__name__/values")["data"])
    assert set(api_series()) <= names, f"not scraped: {sorted(set(api_series()) - names)}"
    assert [s["value"][1] for s in prom.vector(f'up{{job="{API_JOB}"}}')] == ["1"]
    # two scrapes since the requests, so that the dashboard's rates have data
    poll("two scrapes of the API's requests", lambda: prom.vector(f'count_over_time({selector}[1m]) >= 2'))
