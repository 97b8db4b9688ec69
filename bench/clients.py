"""What the client libraries alone cost the worker's thread per game, and the ceiling that puts on
`./dev bench limit`'s ratio (issue 21).

The limit is 1 / max(the worker's pure Python, the database's COPY) per game; but a worker must also take
each game from the broker, publish its two `rating.changed` records and send its rows to PostgreSQL, and
the libraries doing that cost the worker's one Python thread whatever the worker's own code does.
Measured here with the worker's own settings and code for each step, CPU time of this process
(time.process_time: what the thread spends, not what the broker or PostgreSQL spend in their own
processes):

consume  the worker's group consumer (worker.kafka_clients) reading the games, BATCH records a fetch;
produce  the games' rating.changed records through the worker's Publisher.send_keyed (keyed, one producer
         batch per partition, 2 x BATCH records a call), every send acknowledged: aiokafka, and the
         worker's choice of partition (Kafka's murmur2 of the key, cached), which any keyed producer makes;
copy     asyncpg COPYing the games' rows into the worker's staging tables (worker.store.postgres
         copy_staged), one transaction per batch, the rows built beforehand;
rows     apart, not part of the ceiling: the worker building those rows from its records and states
         (state_rows, change_rows, processed_rows), its own code.

A worker that did nothing but its pure Python and consume, produce and copy would reach python /
(python + those three) of the limit: the ceiling. Left out, so the ceiling is generous: building the rows,
reading the states back from PostgreSQL, the locks, the plan's check, offsets, metrics and the event
loop's own turns.
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
    rows_s: float  # the worker's own code: not in `total_s`

    @property
    def total_s(self) -> float:
        """The libraries' share: what the ceiling counts."""
        return self.consume_s + self.produce_s + self.copy_s


async def measure(url: str, bootstrap: str, topic: str, tag: str, batches, batch: int) -> Clients:
    """The steps over the games already in `topic` (read by a group of its own, from the start) and
    the rows of `batches` ((messages, records, states) per batch, as bench.limit.python_cost gives them);
    `url`: an empty migrated database, `tag` names the output topic and the group."""
    games = sum(len(messages) for messages, _, _ in batches)
    cfg = config.load(env={**worker_env(url, bootstrap, tag), "KAFKA_INPUT_TOPICS": topic})
    await dev.create_topics(bootstrap, {cfg.kafka_output_topic: 3})
    consume_s = await _consume(cfg, games, batch)
    produce_s = await _produce(cfg, [(r.key.player_id.encode(), r.payload) for _, records, _ in batches
                                     for r in records], 2 * batch)
    rows_s, copy_s = await _rows_and_copy(url, batches)
    return Clients(consume_s, produce_s, copy_s, rows_s)


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


async def _rows_and_copy(url: str, batches) -> tuple[float, float]:
    """Seconds building each batch's staging rows (the worker's code), and seconds COPYing them (asyncpg),
    batch by batch as the worker does (all the rows at once would grow the heap, which costs here)."""
    conn = await asyncpg.connect(url)
    try:
        await init_store_connection(conn)
        rows_s = copy_s = 0.0
        for messages, records, states in batches:
            started = time.process_time()
            processed = [ProcessedMessage(m.source, m.id, m.type, "applied") for m in messages]
            rows = (state_rows(states), change_rows(records), processed_rows(processed))
            built = time.process_time()
            async with conn.transaction():
                await copy_staged(conn, *rows)
            copy_s += time.process_time() - built
            rows_s += built - started
        return rows_s, copy_s
    finally:
        await conn.close()
