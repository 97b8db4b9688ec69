"""`promtool check rules`, `promtool test rules` and `promtool check config` on deploy/prometheus.

promtool comes from Debian's prometheus package (.ci/run installs it); without it these tests skip,
naming the package.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.deploy.paths import PROMETHEUS_DIR, need

pytestmark = pytest.mark.timeout(120)


def promtool(*args: str, cwd=PROMETHEUS_DIR) -> subprocess.CompletedProcess:
    return subprocess.run([need("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_promtool_check_rules():
    r = promtool("check", "rules", "rules.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_test_rules():
    r = promtool("test", "rules", "rules.test.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_check_config():
    r = promtool("check", "config", "prometheus.yml")
    assert r.returncode == 0, r.stdout + r.stderr


# The unit tests must be able to fail: each change below breaks what one alert promises, and
# `promtool test rules` has to notice.
MUTATIONS = {
    "worker down alerts after 10 minutes instead of 2": ("    expr: up{job=\"rating-worker\"} == 0\n        for: 2m",
                                                          "    expr: up{job=\"rating-worker\"} == 0\n        for: 10m"),
    "a partition reported by two workers counted twice": (
        "max by (job, topic, partition) (rating_worker_consumer_lag)", "rating_worker_consumer_lag"),
    "the first dead letter of a class is missed": (
        "          or\n          sum by (job, error_class) (\n", "          and\n          sum by (job, error_class) (\n"),
    "unsupported messages alert": ('{error_class!="unsupported"}[10m]', "[10m]"),
    "no-progress ignores the lag": ("sum by (job) (rating_worker:consumer_lag:sum) > 0",
                                    "sum by (job) (rating_worker:consumer_lag:sum) >= 0"),
    "a fall of offsets is missed unless its series is new": (
        "          or\n          sum by (job, topic) (\n", "          and\n          sum by (job, topic) (\n"),
    "a worker's start (its series at 0) pages as a fall of offsets": (
        "            rating_worker_offsets_went_back_total > 0\n", "            rating_worker_offsets_went_back_total >= 0\n"),
    "the offsets page ends after 5 minutes instead of an hour": (
        "increase(rating_worker_offsets_went_back_total[1h])", "increase(rating_worker_offsets_went_back_total[5m])"),
    "the read API's probes count as its users' errors": (
        'rating_api_requests_total{route=~"/v1/.*", status=~"5.."}', 'rating_api_requests_total{status=~"5.."}'),
    "a read API whose probes still see some 200s counts as not ready": (
        "          unless on (job, instance)\n", "          or on (job, instance)\n"),
}


@pytest.mark.parametrize("what", sorted(MUTATIONS))
def test_rule_unit_tests_catch_a_broken_rule(tmp_path, what):
    old, new = MUTATIONS[what]
    rules = (PROMETHEUS_DIR / "rules.yml").read_text()
    assert rules.count(old) == 1, f"the mutation {what!r} no longer applies: update MUTATIONS"
    (tmp_path / "rules.yml").write_text(rules.replace(old, new))
    shutil.copy(PROMETHEUS_DIR / "rules.test.yml", tmp_path / "rules.test.yml")
    assert promtool("check", "rules", "rules.yml", cwd=tmp_path).returncode == 0, "the mutant must stay valid"
    r = promtool("test", "rules", "rules.test.yml", cwd=tmp_path)
    assert r.returncode != 0, f"promtool test rules passed although {what}"
