"""Intake.take_before against aiokafka and the real broker: a wait for records cut short because the batch
ahead finished takes nothing, so that records arriving in bursts while batches end at random moments are
all taken, each once, in order.

The worker relies on it to start its next batch as soon as its records are fetched (the latency at a few
thousand games/s): whether the wait ends by records or by the batch ahead, no record may be lost or taken
twice.
"""

from __future__ import annotations

import asyncio
import random

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.integration.harness import make_topics, produce
from worker.observability import Metrics, Readiness
from worker.pipeline.intake import Intake


async def test_waits_cut_short_by_the_batch_ahead_take_nothing(broker):
    topics = await make_topics(broker, partitions=2)
    partitions = [TopicPartition(topics.input, p) for p in (0, 1)]
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                                auto_offset_reset="earliest", fetch_max_wait_ms=50)
    await consumer.start()
    consumer.assign(partitions)
    metrics = Metrics()
    intake = Intake(consumer, metrics, Readiness(metrics, reasons=()), asyncio.sleep)
    rnd = random.Random(7)
    sent = 0

    async def bursts() -> None:
        # at least 30 bursts, and more until enough waits were cut short: on a loaded machine the fetches
        # can win most races, and the test must have cut waits short for its verdict to mean anything
        nonlocal sent
        burst = 0
        while burst < 30 or (cut_short <= 10 and burst < 600):
            values = [f"{burst}-{i}".encode() for i in range(rnd.randint(1, 20))]
            await produce(broker.bootstrap_servers, topics.input, values, partition=burst % 2)
            sent += len(values)
            await asyncio.sleep(rnd.uniform(0, 0.05))
            burst += 1

    taken: dict[TopicPartition, list[int]] = {tp: [] for tp in partitions}
    cut_short = 0
    producer = asyncio.create_task(bursts())
    try:
        while not producer.done() or sum(map(len, taken.values())) < sent:
            # the batch ahead ends after a random few milliseconds, often before any record arrives
            busy = asyncio.ensure_future(asyncio.sleep(rnd.uniform(0, 0.03)))
            records = await intake.take_before(busy, max_records=7)
            if not records:
                cut_short += 1
            for tp, recs in records.items():
                taken[tp].extend(r.offset for r in recs)
            await busy
        await producer
    finally:
        producer.cancel()
        await consumer.stop()
    assert cut_short > 10, "the test never cut a wait short"
    assert sum(map(len, taken.values())) == sent
    for tp, offsets in taken.items():
        assert offsets == list(range(len(offsets))), f"{tp}: a record lost or taken twice"
