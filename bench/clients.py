"""What the client libraries alone cost the worker's thread per game, and the ceiling that puts on
`./dev bench limit`'s ratio (issue 21).

The limit is 1 / max(the worker's pure Python, the database's COPY) per game; but a worker must also take
each game from the broker, publish its two `rating.changed` records and send its rows to PostgreSQL, and
those steps cost the worker's one Python thread whatever the worker's own code does. Measured here with
the worker's own settings and code for each step, CPU time of this process (time.process_time: what the
thread spends, not what the broker or PostgreSQL spend in their own processes):

consume  the worker's group consumer (worker.kafka_clients) reading the games, BATCH records a fetch;
produce  the games' rating.changed records through the worker's Publisher.send_keyed (keyed, one producer
         batch per partition, 2 x BATCH records a call), every send acknowledged;
copy     the games' rows built and COPYed into the worker's staging tables (worker.store.postgres:
         state_rows, change_rows, processed_rows, copy_staged), one transaction per batch.

A worker that did nothing but its pure Python and these three would reach python / (python + clients) of
the limit: the ceiling. Left out, so the ceiling is generous: reading the states back from PostgreSQL, the
locks, the plan's check, offsets, metrics and the event loop's own turns.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import asyncpg

from bench.common import worker_env
from worker import config, dev, kafka_clients
from worker.observability import Metrics, Readiness
from worker.pipeline.publisher import Publisher
from worker.pipeline.retry import Retrier
from worker.store.base import ProcessedMessage
from worker.store.postgres import change_rows, copy_staged, init_store_connection, processed_rows, state_rows


@dataclass(frozen=True)
class Clients:
    """Seconds of this process's CPU for all the games, step by step."""

    consume_s: float
    produce_s: float
    copy_s: float

    @property
    def total_s(self) -> float:
        return self.consume_s + self.produce_s + self.copy_s


async def measure(url: str, bootstrap: str, topic: str, tag: str, batches, batch: int) -> Clients:
    """The three steps over the games already in `topic` (read by a group of its own, from the start) and
    the rows of `batches` ((messages, records, states) per batch, as bench.limit.python_cost gives them);
    `url`: an empty migrated database, `tag` names the output topic and the group."""
    games = sum(len(messages) for messages, _, _ in batches)
    cfg = config.load(env={**worker_env(url, bootstrap, tag), "KAFKA_INPUT_TOPICS": topic})
    await dev.create_topics(bootstrap, {cfg.kafka_output_topic: 3})
    consume_s = await _consume(cfg, games, batch)
    produce_s = await _produce(cfg, [(r.key.player_id.encode(), r.payload) for _, records, _ in batches
                                     for r in records], 2 * batch)
    copy_s = await _copy(url, batches)
    return Clients(consume_s, produce_s, copy_s)


async def _consume(cfg, games: int, batch: int) -> float:
    consumer = kafka_clients.group_consumer(cfg)
    await consumer.start()
    try:
        consumer.subscribe(list(cfg.kafka_input_topics))
        # Counted from the first fetch on (joining the group is not the records' cost), per record, times
        # the games.
        got, counted, started = 0, 0, None
        while got < games:
            fetched = await consumer.getmany(timeout_ms=1000, max_records=batch)
            n = sum(len(records) for records in fetched.values())
            got += n
            if started is not None:
                counted += n
            elif n:
                started = time.process_time()
        return (time.process_time() - started) / max(1, counted) * games
    finally:
        await consumer.stop()


async def _produce(cfg, items: list[tuple[bytes, bytes]], per_call: int) -> float:
    producer = kafka_clients.producer(cfg)
    await producer.start()
    try:
        metrics = Metrics()
        publisher = Publisher(producer, cfg, metrics, Retrier(cfg, metrics, Readiness(metrics), asyncio.Event()))
        await publisher.send_keyed(cfg.kafka_output_topic, items[:10])  # the topic's metadata, once
        started = time.process_time()
        for i in range(0, len(items), per_call):
            await publisher.send_keyed(cfg.kafka_output_topic, items[i:i + per_call])
        return time.process_time() - started
    finally:
        await producer.stop()


async def _copy(url: str, batches) -> float:
    conn = await asyncpg.connect(url)
    try:
        await init_store_connection(conn)
        started = time.process_time()
        for messages, records, states in batches:
            processed = [ProcessedMessage(m.source, m.id, m.type, "applied") for m in messages]
            async with conn.transaction():
                await copy_staged(conn, state_rows(states), change_rows(records), processed_rows(processed))
        return time.process_time() - started
    finally:
        await conn.close()
