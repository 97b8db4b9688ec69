"""`./dev bench broker`: what the embedded broker (Tansu, memory engine) costs, apart from the worker.

Two measurements, on a broker of their own:
- fetch cost against the log's length: a partition gets BENCH_BROKER_BATCHES record batches (one record
  each, the way a producer with little to send writes them), and at steps on the way a fetch of the
  newest record is timed (median of 5, with fetch_max_wait_ms=1 so the broker hardly holds it; with 0
  Tansu answers every fetch with no records at all). Tansu's
  memory engine keeps every batch as an object and lists all of a partition's objects on each fetch, so
  the time grows with the number of batches: a consumer that fetches at a steady rate costs the broker
  more CPU minute after minute. Apache Kafka finds an offset through its index and does not.
- a fetch with records waiting, against fetch_max_wait_ms: Tansu answers only after the wait, even
  when records are there (hence KAFKA_FETCH_MAX_WAIT_MS=100 in the latency benchmark).

These explain the latency that grows over a long run (`./dev bench soak`, `BENCH_SECONDS=120 ./dev bench
latency`) while the worker's own batch times stay flat: it is the broker's, and production brokers
do not have it (docs/operations.md, "The embedded broker").
"""

from __future__ import annotations

import os
import statistics
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from worker import dev

BATCHES = int(os.environ.get("BENCH_BROKER_BATCHES", "40000"))


async def _fetch_newest_ms(consumer: AIOKafkaConsumer, tp: TopicPartition, tries: int = 5) -> float | None:
    """Median time of a fetch of the partition's newest record; None when no try got it within 5 s."""
    times = []
    for _ in range(tries):
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, end - 1)
        started = time.perf_counter()
        records = await consumer.getmany(tp, timeout_ms=5000)
        if not records.get(tp):
            return None
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def fetch_cost(bootstrap: str) -> None:
    await dev.create_topics(bootstrap, {"bench-broker-log": 1})
    tp = TopicPartition("bench-broker-log", 0)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=0)
    held = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=500)
    for client in (producer, held):
        await client.start()
    try:
        held.assign([tp])
        steps = sorted({s for s in (100, 1000, 10000, 20000, 40000, 80000, BATCHES) if s <= BATCHES})
        written, value = 0, b"x" * 300
        for step in steps:
            while written < step:
                await producer.send_and_wait(tp.topic, value)  # one batch per record: nothing to linger for
                written += 1
                if written % 5000 == 0:
                    print(f"  broker: {written}/{BATCHES} batches written", flush=True)
            work = await _fetch_newest_ms(held, tp)
            # a consumer of its own, stopped at once: one that gets nothing keeps fetching in the background
            short = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=20)
            await short.start()
            try:
                short.assign([tp])
                cliff = await _fetch_newest_ms(short, tp, tries=1)
            finally:
                await short.stop()
            print(f"broker: {step:>6,} record batches in the partition: a fetch of the newest record costs the "
                  f"broker {'nothing back' if work is None else f'{work - 500:6.1f} ms'} beyond its hold; with "
                  f"fetch_max_wait_ms=20: {'no records at all' if cliff is None else f'{cliff:.0f} ms'}", flush=True)
    finally:
        for client in (producer, held):
            await client.stop()


async def held_fetch(bootstrap: str) -> None:
    await dev.create_topics(bootstrap, {"bench-broker-wait": 1})
    tp = TopicPartition("bench-broker-wait", 0)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=0)
    await producer.start()
    try:
        for _ in range(20):
            await producer.send_and_wait(tp.topic, b"y")
        for wait in (1, 20, 100, 500):
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=wait)
            await consumer.start()
            try:
                consumer.assign([tp])
                print(f"broker: fetch_max_wait_ms={wait:>3}: a fetch with records waiting is answered after "
                      f"{await _fetch_newest_ms(consumer, tp):6.1f} ms", flush=True)
            finally:
                await consumer.stop()
    finally:
        await producer.stop()


async def main() -> None:
    broker = dev.broker_from_env_or_start()
    try:
        await held_fetch(broker.bootstrap_servers)
        await fetch_cost(broker.bootstrap_servers)
    finally:
        broker.stop()
