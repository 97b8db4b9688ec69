"""Issue 18, "a stop is clean at any moment": SIGTERM while the worker waits for an unreachable database
or broker at start-up, during a database outage, with the broker paused (a coordinator that does not
answer), and a rebalance during a database outage. Each ends within a bounded, documented time
(DRAIN_TIMEOUT_S for the batches in hand, about 15 s more for closing: docs/operations.md, "Stopping"),
with exit 0, no traceback, and nothing committed past a record that was neither rated nor dead-lettered
(the invariants of tests/integration/test_faults.py, after the stream is finished by a fresh worker).
"""

from __future__ import annotations

import asyncio
import signal
import time

import orjson

from tests.integration.harness import Workers, make_topics, produce, wait_processed, worker_env
from tests.integration.test_faults import assert_invariants, database_proxy, history_ids, published_ids
from worker import dev
from worker.dev.streams import games, player_of

DRAIN_TIMEOUT_S = 5
# The documented bound of a stop beyond DRAIN_TIMEOUT_S: each Kafka client's stop (5 s), the database
# pool's close (5 s), and a margin for the process's start and the machine's noise.
CLOSE_BOUND_S = 15


async def wait_for_line(workers: Workers, name: str, *texts: str, timeout: float = 60) -> None:
    """Until the worker's log has one of `texts`."""
    deadline = time.monotonic() + timeout
    while not any(text in workers.log(name) for text in texts):
        assert time.monotonic() < deadline, f"{name} never logged {texts!r}:\n{workers.log(name)[-3000:]}"
        await asyncio.sleep(0.2)


# The worker retries database work that failed: a batch's transaction, or taking a published batch's
# changes out of the outbox (whichever the cut hit).
DATABASE_RETRY = ("batch rolled back, retrying", "mark published failed, retrying")


async def stopped_within(workers: Workers, w, bound: float) -> float:
    """SIGTERM, then the exit code must be 0 within `bound` seconds; returns how long it took."""
    asked = time.monotonic()
    w.signal(signal.SIGTERM)
    code = await workers.wait(w, timeout=bound + 30)
    took = time.monotonic() - asked
    assert code == 0, f"exit {code}"
    assert took <= bound, f"the stop took {took:.1f} s, more than {bound} s"
    return took


def assert_clean_log(text: str) -> list[dict]:
    """Every line is one of the worker's JSON lines (an exception the worker did not handle would print
    a bare traceback), none of the worker's own is an ERROR, and its last word is that it stopped. (A
    library's line may carry a traceback inside its JSON: asyncpg's pool during an outage does; aiokafka
    logs every failed connection as an ERROR.)"""
    raw = [line for line in text.splitlines() if line.strip()]
    assert all(line.startswith("{") for line in raw), next(line for line in raw if not line.startswith("{"))
    ours = [e for e in map(orjson.loads, raw) if e["logger"].startswith("rating_worker")]
    assert not [e for e in ours if e["level"] in ("error", "critical")], [e for e in ours if e["level"] == "error"]
    assert ours and ours[-1]["msg"].startswith("worker stopped"), ours[-3:]
    return ours


async def test_sigterm_while_the_database_is_unreachable_at_start_up(broker, workers):
    topics = await make_topics(broker)
    closed_port = dev.free_port()
    env = worker_env(f"postgresql://postgres@127.0.0.1:{closed_port}/ratings", broker, topics)
    w = workers.start(env, "no-database")
    await wait_for_line(workers, "no-database", "cannot connect to PostgreSQL: the server is unreachable, retrying")
    await stopped_within(workers, w, CLOSE_BOUND_S)
    assert_clean_log(workers.log("no-database"))


async def test_sigterm_while_the_broker_is_unreachable_at_start_up(database_url, broker, workers):
    topics = await make_topics(broker)
    env = worker_env(database_url, broker, topics)
    env["KAFKA_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{dev.free_port()}"
    w = workers.start(env, "no-broker")
    await wait_for_line(workers, "no-broker", "failed, retrying")
    await stopped_within(workers, w, CLOSE_BOUND_S)
    assert_clean_log(workers.log("no-broker"))


async def test_sigterm_during_a_database_outage_abandons_the_batch_in_hand(database_url, broker, workers):
    topics = await make_topics(broker, partitions=2)
    values = games(1200, players=40, seed=31)
    async with database_proxy(database_url) as (proxy, proxied):
        env = worker_env(proxied, broker, topics, batch_size=100, retry_backoff_max_s=1,
                         drain_timeout_s=DRAIN_TIMEOUT_S)
        w = workers.start(env, "outage")
        await produce(broker.bootstrap_servers, topics.input, values[:400], key_of=player_of)
        assert await wait_processed(database_url, 400) == 400
        proxy.cut()
        await produce(broker.bootstrap_servers, topics.input, values[400:], key_of=player_of)
        await wait_for_line(workers, "outage", *DATABASE_RETRY)
        await stopped_within(workers, w, DRAIN_TIMEOUT_S + CLOSE_BOUND_S)
        lines = assert_clean_log(workers.log("outage"))
        assert lines[-1]["abandoned"] >= 1, lines[-1]
        proxy.restore()
        again = workers.start(env, "after")
        assert await wait_processed(database_url, len(values)) == len(values)
        published = await published_ids(broker.bootstrap_servers, topics.output, await history_ids(database_url))
        assert await workers.stop(again) == 0
    await assert_invariants(database_url, values, published)


async def test_a_rebalance_during_a_database_outage_does_not_hold_the_group(database_url, broker, workers):
    """Worker A loses its database (a network cut: the database itself is up); worker B joins. A gives up
    the batch in hand instead of waiting for the outage to end, so the rebalance completes and B rates
    its share while A's database is still cut; the abandoned records come again to their next owner."""
    topics = await make_topics(broker, partitions=4)
    values = games(2000, players=60, seed=32)
    async with database_proxy(database_url) as (proxy, proxied):
        env_a = worker_env(proxied, broker, topics, batch_size=100, retry_backoff_max_s=1)
        a = workers.start(env_a, "a")
        await produce(broker.bootstrap_servers, topics.input, values[:400], key_of=player_of)
        assert await wait_processed(database_url, 400) == 400
        proxy.cut()
        cut_at = time.monotonic()
        await produce(broker.bootstrap_servers, topics.input, values[400:], key_of=player_of)
        await wait_for_line(workers, "a", *DATABASE_RETRY)
        before_b = await wait_processed(database_url, 0)
        b = workers.start(worker_env(database_url, broker, topics, batch_size=100), "b")
        # B rates records while A's database is still cut (the cut lasts until proxy.restore() below).
        deadline = time.monotonic() + 45
        while await wait_processed(database_url, 0) < before_b + 200:
            assert time.monotonic() < deadline, ("the rebalance waited for A's database outage:\n"
                                                 + workers.log("a")[-5000:] + "\nB:\n" + workers.log("b")[-3000:])
            await asyncio.sleep(0.5)
        await wait_for_line(workers, "a", "abandoned uncommitted")
        assert '"partitions assigned"' in workers.log("b")
        held_for = time.monotonic() - cut_at
        proxy.restore()
        assert await wait_processed(database_url, len(values), timeout=180) == len(values)
        published = await published_ids(broker.bootstrap_servers, topics.output, await history_ids(database_url))
        assert await workers.stop(b) == 0
        assert await workers.stop(a) == 0
    assert held_for < 60
    await assert_invariants(database_url, values, published)


async def test_sigterm_with_the_broker_paused_mid_stream(database_url, own_broker, workers):
    """The broker stops answering (SIGSTOP) with batches in hand: their publish or offset commit and the
    group's leave never get an answer. The stop still ends in time; nothing is lost once it is back."""
    topics = await make_topics(own_broker, partitions=2)
    values = games(3000, players=60, seed=33)
    await produce(own_broker.bootstrap_servers, topics.input, values, key_of=player_of)
    env = worker_env(database_url, own_broker, topics, batch_size=100, drain_timeout_s=DRAIN_TIMEOUT_S)
    w = workers.start(env, "paused")
    assert await wait_processed(database_url, 300) >= 300
    own_broker.pause()
    try:
        await asyncio.sleep(1)
        try:
            await stopped_within(workers, w, DRAIN_TIMEOUT_S + CLOSE_BOUND_S)
        except AssertionError:
            print(workers.log("paused")[-6000:])
            raise
    finally:
        own_broker.resume()
    assert_clean_log(workers.log("paused"))
    again = workers.start(env, "after")
    assert await wait_processed(database_url, len(values), timeout=120) == len(values)
    published = await published_ids(own_broker.bootstrap_servers, topics.output, await history_ids(database_url))
    assert await workers.stop(again) == 0
    await assert_invariants(database_url, values, published)
