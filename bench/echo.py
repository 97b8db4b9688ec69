"""`python -m bench.echo`: the latency benchmark's baseline, the least a consumer of the same topics can do.

It reads the worker's input topic with the worker's own consumer and producer settings
(worker/kafka_clients.py, the same environment: KAFKA_INPUT_TOPICS, KAFKA_FETCH_MAX_WAIT_MS, ...) and
answers each record at once with a record the benchmark's reader takes for a rating.changed of it (the
message's id as data.cause.id), committing offsets after each fetch. No database, no rating: the time the
two hops through the broker take at the same rate, which the worker's latency is reported against.
"""

from __future__ import annotations

import asyncio
import signal

import orjson

from worker import config, kafka_clients


async def echo() -> None:
    cfg = config.load()
    consumer = kafka_clients.group_consumer(cfg)
    producer = kafka_clients.producer(cfg)
    await producer.start()
    await consumer.start()
    consumer.subscribe(list(cfg.kafka_input_topics))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        while not stop.is_set():
            fetched = await consumer.getmany(timeout_ms=500)
            sends = [await producer.send(cfg.kafka_output_topic,
                                         orjson.dumps({"data": {"cause": {"id": orjson.loads(r.value)["id"]}}}))
                     for records in fetched.values() for r in records]
            if sends:
                await asyncio.gather(*sends)
                await consumer.commit()
    finally:
        await consumer.stop()
        await producer.stop()


if __name__ == "__main__":
    asyncio.run(echo())
