"""What the worker really exports, and which metrics and labels a PromQL expression uses.

`exported_series()` instantiates the worker's `Metrics` (`api_series()` the read API's) and reads
prometheus_client's own exposition of it, so the names are never copied by hand. `parse()` is a small PromQL scanner: enough to list the
selectors (metric name + label matchers), the grouping labels (`by`, `without`, `on`, `ignoring`,
`group_left`, `group_right`) and the functions of the expressions in deploy/ (rules and dashboard).
Prometheus itself (promtool, and the real server in test_prometheus_scrape.py) checks the full syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Labels Prometheus attaches to every scraped series (the target's labels).
TARGET_LABELS = frozenset({"job", "instance"})
# Series Prometheus makes itself for each target.
PROMETHEUS_SERIES = {"up": TARGET_LABELS}

AGGREGATORS = frozenset({
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile", "limitk", "limit_ratio",
})
FUNCTIONS = frozenset({
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate", "label_join",
    "label_replace", "last_over_time", "ln", "log10", "log2", "max_over_time", "min_over_time", "minute",
    "month", "predict_linear", "present_over_time", "quantile_over_time", "rate", "resets", "round",
    "scalar", "sgn", "sort", "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time",
    "time", "timestamp", "vector", "year",
}) | AGGREGATORS
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
KEYWORDS = frozenset({"bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"})

_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NUMBER = re.compile(r"[0-9.][0-9a-zA-Z_.]*")


class PromQLError(ValueError):
    pass


@dataclass
class Selector:
    name: str | None
    matchers: list[tuple[str, str, str]] = field(default_factory=list)  # (label, op, quoted value)


@dataclass
class Parsed:
    selectors: list[Selector] = field(default_factory=list)
    grouping: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)

    @property
    def names(self) -> set[str]:
        return {s.name for s in self.selectors if s.name}


def _skip_ws(expr: str, i: int) -> int:
    while i < len(expr) and expr[i].isspace():
        i += 1
    return i


def _matchers(expr: str, i: int) -> tuple[list[tuple[str, str, str]], int]:
    """Label matchers from the `{` at i to its `}`; returns them and the index after the `}`."""
    assert expr[i] == "{"
    out = []
    i += 1
    while True:
        i = _skip_ws(expr, i)
        if i >= len(expr):
            raise PromQLError(f"unclosed {{ in {expr!r}")
        if expr[i] == "}":
            return out, i + 1
        m = _LABEL.match(expr, i)
        if not m:
            raise PromQLError(f"bad label matcher at {expr[i:i + 30]!r} in {expr!r}")
        s = _STRING.match(expr, m.end())
        if not s:
            raise PromQLError(f"label value is not a string at {expr[m.end():m.end() + 30]!r}")
        out.append((m.group(1), m.group(2), s.group()))
        i = _skip_ws(expr, s.end())
        if i < len(expr) and expr[i] == ",":
            i += 1


def parse(expr: str) -> Parsed:
    out = Parsed()
    i, n = 0, len(expr)
    while i < n:
        c = expr[i]
        if c.isspace():
            i += 1
        elif c == "#":
            j = expr.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'`":
            m = _STRING.match(expr, i)
            if not m:
                raise PromQLError(f"unclosed string in {expr!r}")
            i = m.end()
        elif c == "[":  # a range or subquery: durations only
            j = expr.find("]", i)
            if j < 0:
                raise PromQLError(f"unclosed [ in {expr!r}")
            i = j + 1
        elif c == "{":
            matchers, i = _matchers(expr, i)
            out.selectors.append(Selector(None, matchers))
        elif c.isalpha() or c in "_:":
            word = _IDENT.match(expr, i).group()
            i += len(word)
            k = _skip_ws(expr, i)
            nxt = expr[k] if k < n else ""
            lower = word.lower()
            if lower in GROUPING and nxt != "(":
                if lower not in ("group_left", "group_right"):  # only these may go without a list
                    raise PromQLError(f"{word} without a label list in {expr!r}")
            elif lower in GROUPING:
                close = expr.find(")", k)
                out.grouping.update(x.strip() for x in expr[k + 1:close].split(",") if x.strip())
                i = close + 1
            elif lower in KEYWORDS:
                pass
            elif nxt == "(" or (lower in AGGREGATORS and _IDENT.match(expr, k)
                                and _IDENT.match(expr, k).group().lower() in ("by", "without")):
                out.functions.add(word)
            elif nxt == "{":
                matchers, i = _matchers(expr, k)
                out.selectors.append(Selector(word, matchers))
            else:
                out.selectors.append(Selector(word))
        elif c.isdigit() or c == ".":
            i = _NUMBER.match(expr, i).end()
        else:
            i += 1
    return out


GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def substitute_grafana(expr: str, variables: dict[str, str]) -> str:
    """Replace Grafana's built-in interval variables and the dashboard's own ($name, ${name})."""
    for k, v in GRAFANA_VARIABLES.items():
        expr = expr.replace(k, v)
    for name, value in variables.items():
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    if "$" in expr:
        raise PromQLError(f"unknown Grafana variable in {expr!r}")
    return expr


def exported_series() -> dict[str, frozenset[str]]:
    """Every sample name the worker exposes -> its label names, from prometheus_client's exposition.

    Labelled metrics show no sample until a child exists, so one child of each is made first."""
    from worker.observability import Metrics

    return _series(Metrics())


def api_series() -> dict[str, frozenset[str]]:
    """The same for the read API (`rating-worker serve`), whose metrics are its own registry's."""
    from worker.api.app import Metrics

    return _series(Metrics())


def _series(metrics) -> dict[str, frozenset[str]]:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    _children(metrics)
    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(labels) for name, labels in series.items()}


def exported_families() -> dict[str, frozenset[str]]:
    """Each metric the worker registers -> the sample names it exposes (without `_created`)."""
    from worker.observability import Metrics

    return _families(Metrics())


def api_families() -> dict[str, frozenset[str]]:
    """The same for the read API."""
    from worker.api.app import Metrics

    return _families(Metrics())


def _families(metrics) -> dict[str, frozenset[str]]:
    _children(metrics)
    return {
        family.name: frozenset(s.name for s in family.samples if not s.name.endswith("_created"))
        for family in metrics.registry.collect()
    }


def _children(metrics) -> None:
    from prometheus_client.metrics import MetricWrapperBase

    for value in vars(metrics).values():
        labelnames = getattr(value, "_labelnames", ())
        if isinstance(value, MetricWrapperBase) and labelnames:
            value.labels(*["x"] * len(labelnames))


def check(expr: str, exported: dict[str, frozenset[str]], recorded: dict[str, frozenset[str]] | None = None
          ) -> list[str]:
    """Problems with one expression: unknown metrics, functions or labels. Empty when all is well."""
    known = {**PROMETHEUS_SERIES, **exported, **(recorded or {})}
    try:
        parsed = parse(expr)
    except PromQLError as exc:
        return [str(exc)]
    problems = []
    if not parsed.selectors:
        problems.append(f"selects no metric: {expr!r}")
    labels_in_expr = set(TARGET_LABELS)
    for sel in parsed.selectors:
        if sel.name is None:
            problems.append(f"a selector without a metric name in {expr!r}")
            continue
        if sel.name not in known:
            problems.append(f"{sel.name} is not a metric the worker exports (nor a recording rule, nor up)")
            continue
        allowed = known[sel.name] | TARGET_LABELS
        labels_in_expr |= allowed
        for label, _, _ in sel.matchers:
            if label not in allowed:
                problems.append(f"{sel.name} has no label {label!r} (it has {sorted(allowed)})")
    for fn in parsed.functions:
        if fn not in FUNCTIONS:
            problems.append(f"{fn}() is not a PromQL function")
    for label in parsed.grouping:
        if label not in labels_in_expr:
            problems.append(f"grouping by {label!r}, which none of {sorted(parsed.names)} has")
    return problems
