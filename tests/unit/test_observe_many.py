"""observe_many: the same histogram as one observe() per value, bucket for bucket."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram

from worker.observability import observe_many

BUCKETS = (0.01, 0.05, 0.1, 0.25, 1, 5)


def _samples(h: Histogram) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for metric in h.collect() for s in metric.samples if not s.name.endswith("_created")}


def _pair() -> tuple[Histogram, Histogram]:
    return (Histogram("one_by_one", "x", buckets=BUCKETS, registry=CollectorRegistry()),
            Histogram("one_by_one", "x", buckets=BUCKETS, registry=CollectorRegistry()))


def _same(one: Histogram, many: Histogram) -> None:
    a, b = _samples(one), _samples(many)
    assert a.keys() == b.keys()
    for key in a:
        if key[0].endswith("_sum"):  # added once, not value by value: equal but for the last bit
            assert (math.isnan(a[key]) and math.isnan(b[key])) or math.isclose(a[key], b[key], rel_tol=1e-9,
                                                                                 abs_tol=1e-9), key
        else:
            assert a[key] == b[key], key


values = st.lists(st.one_of(st.sampled_from(BUCKETS), st.floats(-1, 100, allow_nan=False), st.just(float("inf"))))


@given(values, values)
def test_the_same_as_observe_one_by_one_after_earlier_observations(before, vs):
    one, many = _pair()
    for v in before:
        one.observe(v)
        many.observe(v)
    for v in vs:
        one.observe(v)
    observe_many(many, vs)
    _same(one, many)


def test_a_bound_itself_falls_in_its_bucket():
    _, many = _pair()
    observe_many(many, [0.05, 0.05000001, 5, 6])
    buckets = {dict(labels)["le"]: v for (name, labels), v in _samples(many).items() if name.endswith("_bucket")}
    assert (buckets["0.05"], buckets["0.1"], buckets["5.0"], buckets["+Inf"]) == (1, 2, 3, 4)


def test_a_nan_goes_to_the_sum_and_no_bucket_as_with_observe():
    one, many = _pair()
    for v in (0.02, float("nan")):
        one.observe(v)
    observe_many(many, [0.02, float("nan")])
    _same(one, many)
