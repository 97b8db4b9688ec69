"""The dashboard and the rules query only metrics (and labels) the worker really exports."""

from __future__ import annotations

import json
import re

import pytest

from tests.deploy.paths import DASHBOARD, PROMETHEUS_DIR, load_yaml
from tests.deploy.promql import (
    PromQLError,
    api_families,
    api_series,
    check,
    exported_families,
    exported_series,
    parse,
    substitute_grafana,
)

# ---- the scanner itself -----------------------------------------------------------------------


def test_parse_finds_selectors_grouping_and_functions():
    p = parse('sum by (job, topic) (max by (job, topic, partition) (rating_worker_consumer_lag{topic=~"games.*"}))'
              ' / on (job) group_left sum without (instance) (rate(up[5m] offset 10m)) > bool 0.5')
    assert [(s.name, s.matchers) for s in p.selectors] == [
        ("rating_worker_consumer_lag", [("topic", "=~", '"games.*"')]), ("up", [])]
    assert p.grouping == {"job", "topic", "partition", "instance"}
    assert p.functions == {"sum", "max", "rate"}


def test_parse_ignores_strings_durations_and_numbers():
    p = parse('histogram_quantile(0.99, sum by (le) (rate(x_bucket{a="b{c}", d!~"rate(y)"}[10m:1m]))) > 1e3')
    assert p.names == {"x_bucket"}
    assert p.selectors[0].matchers == [("a", "=", '"b{c}"'), ("d", "!~", '"rate(y)"')]


def test_parse_rejects_broken_matchers():
    with pytest.raises(PromQLError):
        parse('rating_worker_ready{job="rating-worker"')
    with pytest.raises(PromQLError):
        parse("rating_worker_ready{job=rating-worker}")


def test_check_reports_what_the_worker_does_not_export():
    exported = exported_series()
    assert check('sum by (outcome) (rate(rating_worker_messages_total{type="game.finished"}[5m]))', exported) == []
    assert any("rating_worker_messagez_total" in p for p in check("rate(rating_worker_messagez_total[5m])", exported))
    assert any("'colour'" in p for p in check('rating_worker_ready{colour="red"}', exported))
    assert any("'shard'" in p for p in check("sum by (shard) (rating_worker_outbox_backlog)", exported))
    assert any("rte()" in p for p in check("rte(rating_worker_db_retries_total[5m])", exported))
    assert check('up{job="rating-worker"} == 0', exported) == []


def test_the_exported_names_come_from_the_worker():
    exported = exported_series()
    families = exported_families()
    assert len(families) >= 10
    assert all(name.startswith("rating_worker_") for name in exported)
    for family, samples in families.items():
        assert samples and samples <= exported.keys(), family
    # histograms expose buckets with `le`
    assert any(name.endswith("_bucket") and "le" in labels for name, labels in exported.items())


# ---- the dashboard ----------------------------------------------------------------------------


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _panels(dash: dict) -> list[dict]:
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def _variables(dash: dict) -> dict[str, str]:
    """The dashboard's variables, each with a value to put in its place for a check."""
    values = {}
    for v in dash["templating"]["list"]:
        values[v["name"]] = v.get("allValue") or ".*" if v["type"] == "query" else "prometheus"
    return values


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL with the Grafana variables replaced) for every target of every panel."""
    dash = _dashboard()
    variables = _variables(dash)
    out = []
    for p in _panels(dash):
        for t in p.get("targets", []):
            out.append((p["title"], substitute_grafana(t["expr"], variables)))
    return out


def test_dashboard_is_well_formed():
    dash = _dashboard()
    ids = [p["id"] for p in _panels(dash)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in _panels(dash):
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        if p["type"] == "row":
            continue
        assert p.get("targets"), f"panel {p['title']!r} has no query"
        assert p["datasource"]["uid"] == "${datasource}", "panels must use the datasource variable (portable)"
        for t in p["targets"]:
            assert t["expr"].strip() and t["refId"], p["title"]
    assert {v["name"] for v in dash["templating"]["list"]} >= {"datasource", "instance"}
    assert dash["uid"] and dash["title"]


def test_every_dashboard_query_uses_exported_metrics_and_labels():
    exported = {**exported_series(), **api_series()}
    problems = [f"{title}: {problem}" for title, expr in dashboard_queries() for problem in check(expr, exported)]
    assert problems == []


def test_dashboard_variable_queries_use_exported_metrics():
    exported = exported_series()
    for v in _dashboard()["templating"]["list"]:
        if v["type"] != "query":
            continue
        query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)", query.strip())
        assert m, f"variable {v['name']}: expected label_values(selector, label), got {query!r}"
        selector, label = m.groups()
        assert check(selector, exported) == []
        (name,) = parse(selector).names
        assert label in exported.get(name, frozenset()) | {"job", "instance"}


def test_every_metric_the_worker_and_the_api_export_is_on_the_dashboard():
    used = set().union(*(parse(expr).names for _, expr in dashboard_queries()))
    families = {**exported_families(), **api_families()}
    missing = [family for family, samples in families.items() if not samples & used]
    assert missing == [], f"metrics with no dashboard panel (add one to {DASHBOARD.name}): {missing}"


# ---- the rules --------------------------------------------------------------------------------


def _rules() -> list[dict]:
    return [r for g in load_yaml(PROMETHEUS_DIR / "rules.yml")["groups"] for r in g["rules"]]


def test_rules_use_exported_metrics_and_labels():
    exported = {**exported_series(), **api_series()}
    rules = _rules()
    recorded = {}
    for r in rules:
        if "record" in r:
            p = parse(r["expr"])
            labels = set(p.grouping)
            for name in p.names:
                labels |= exported.get(name, frozenset())
            recorded[r["record"]] = frozenset(labels)
    problems = [f"{r.get('alert') or r.get('record')}: {problem}"
                for r in rules for problem in check(r["expr"], exported, recorded)]
    assert problems == []


def test_the_issue_s_alerts_exist_with_a_severity_and_a_summary():
    alerts = {r["alert"]: r for r in _rules() if "alert" in r}
    wanted = {  # what each alert of the issue must look at
        "RatingWorkerConsumerLagGrowing": "rating_worker:consumer_lag:sum",
        "RatingWorkerDeadLetters": "rating_worker_dead_letters_total",
        "RatingWorkerOutboxBacklog": "rating_worker_outbox_backlog",
        "RatingWorkerDatabaseRetries": "rating_worker_db_retries_total",
        "RatingWorkerNoProgress": "rating_worker_batch_size_count",
        "RatingWorkerDown": "up",
        "RatingWorkerOffsetsWentBack": "rating_worker_offsets_went_back_total",
    }
    for name, metric in wanted.items():
        assert name in alerts, name
        assert metric in parse(alerts[name]["expr"]).names, name
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name


def test_offsets_that_went_back_page_and_point_to_the_runbook():
    """The broker lost data (or the group's offsets were reset): a page, with the operator's steps,
    on a metric the worker declares (a panel too: test_every_metric_the_worker_and_the_api_export_is_on_the_dashboard)."""
    assert "rating_worker_offsets_went_back_total" in exported_series()
    alert = {r["alert"]: r for r in _rules() if "alert" in r}["RatingWorkerOffsetsWentBack"]
    assert alert["labels"]["severity"] == "critical"
    assert "for" not in alert, "any fall pages at once"
    assert "docs/operations.md" in alert["annotations"]["description"]
    assert "After a broker loses its data" in alert["annotations"]["description"]
    used = set().union(*(parse(expr).names for _, expr in dashboard_queries()))
    assert "rating_worker_offsets_went_back_total" in used


def test_the_read_api_s_alerts_look_at_its_requests():
    """The API's own metrics (the names issue 40 gives them), and alerts on its errors and its readiness."""
    api = api_series()
    assert api["rating_api_requests_total"] == {"route", "status"}
    assert api["rating_api_request_seconds_bucket"] == {"route", "le"}
    alerts = {r["alert"]: r for r in _rules() if "alert" in r}
    for name in ("RatingApiErrors", "RatingApiNotReady"):
        assert parse(alerts[name]["expr"]).names == {"rating_api_requests_total"}, name
    routes = {m[2] for sel in parse(alerts["RatingApiNotReady"]["expr"]).selectors for m in sel.matchers
              if m[0] == "route"}
    assert routes == {'"/readyz"'}, "readiness is what the probes of /readyz were answered"
    assert 'up{job="rating-api"}' in alerts["RatingApiDown"]["expr"]
