"""What the worker writes to the broker: `rating.changed` (keyed by player) and dead letters.

Both go through the one producer of worker.kafka_clients, in batches built here: aiokafka's per-record
send() costs ~27 us, appending to a batch ~5 us, and a dead letter may have neither key nor value, which
send() refuses. The byte formats are worker.contract's (changed, deadletter, binding); every send is
retried by the retry policy (worker.pipeline.retry).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.partitioner import murmur2

from worker import kafka_clients
from worker.config import Config
from worker.contract import deadletter
from worker.contract.binding import OUTPUT_HEADERS
from worker.contract.changed import ChangeRecord
from worker.observability import Metrics, log, observe_many
from worker.pipeline.retry import Retrier

__all__ = ["Publisher"]

logger = logging.getLogger("rating_worker.pipeline")

# The longest key of a dead letter that is hashed to choose its partition (murmur2 is pure Python).
DEAD_LETTER_KEY_HASHED = 1024
# The player keys whose partition is remembered (murmur2 costs ~7 us a key); the cache is cleared when full.
KEY_CACHE = 200_000


class Publisher:
    def __init__(self, producer: AIOKafkaProducer, config: Config, metrics: Metrics, retrier: Retrier) -> None:
        self.producer = producer
        self.config = config
        self.metrics = metrics
        self.retrier = retrier
        self._hashes: dict[bytes, int] = {}

    # ---- rating.changed ------------------------------------------------------------------------------

    async def publish(self, records: Sequence[ChangeRecord]) -> None:
        """The changes of a batch, each as it was encoded once (ChangeRecord.payload)."""
        if not records:
            return
        await self.retrier.broker("publish", lambda: self.send_keyed(
            self.config.kafka_output_topic, [(r.key.player_id.encode(), r.payload) for r in records]))
        now = time.time()
        per_rating = Counter((r.key.system, r.key.category) for r in records)
        for (system, category), n in per_rating.items():
            self.metrics.rating_changes.labels(system, category).inc(n)
        # One lag observation per cause (message), not per change.
        causes = {(r.cause_source, r.cause_id): r.changed_at for r in records}
        observe_many(self.metrics.event_lag, [max(0.0, now - changed_at) for changed_at in causes.values()])

    async def send_keyed(self, topic: str, items: list[tuple[bytes, bytes]]) -> None:
        """Send (key, value) records with Kafka's default partitioner, one producer batch per partition.

        The partition is the same as the Java client's (murmur2 of the key), so consumers keyed by player
        see one partition per player. Every record says it is a structured CloudEvent (OUTPUT_HEADERS).
        """
        partitions = sorted(await self.producer.partitions_for(topic))
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for key, value in items:
            by_partition.setdefault(partitions[self._key_hash(key) % len(partitions)], []).append((key, value))
        futures = []
        for partition, records in by_partition.items():
            batch = self.producer.create_batch()
            for key, value in records:
                if batch.append(key=key, value=value, timestamp=None, headers=OUTPUT_HEADERS) is None:
                    batch.close()
                    futures.append(await self.producer.send_batch(batch, topic, partition=partition))
                    batch = self.producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None, headers=OUTPUT_HEADERS)
            batch.close()
            futures.append(await self.producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*futures)

    def _key_hash(self, key: bytes) -> int:
        """murmur2 (pure Python in aiokafka, ~7 us) cached per key; the cache is bounded by clearing it."""
        h = self._hashes.get(key)
        if h is None:
            if len(self._hashes) >= KEY_CACHE:
                self._hashes.clear()
            h = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return h

    # ---- dead letters --------------------------------------------------------------------------------

    async def dead_letter(self, dead: Sequence) -> None:
        """Copy each (record, BadMessage) to the DLQ, as whole as fits (worker.contract.deadletter)."""
        topic = self.config.kafka_dlq_topic
        limit = kafka_clients.request_limit(self.config) - 1024  # the produce request's own framing
        letters = [(record, exc, deadletter.build(record, exc.error_class, exc.reason, limit)) for record, exc in dead]

        async def send_all() -> None:
            futures = [await self._send_letter(topic, record, letter) for record, _, letter in letters]
            results = await asyncio.gather(*futures, return_exceptions=True)
            for (record, exc, _), result in zip(letters, results, strict=True):
                if isinstance(result, MessageSizeTooLargeError):
                    # The broker's limit (message.max.bytes) is below the producer's: the record's parts go.
                    small = deadletter.minimal(record, exc.error_class, exc.reason)
                    await (await self._send_letter(topic, record, small))
                elif isinstance(result, BaseException):
                    raise result

        await self.retrier.broker("dead-letter", send_all)
        for record, exc, letter in letters:
            self.metrics.messages.labels("unknown", "dead_lettered", exc.error_class).inc()
            self.metrics.dead_letters.labels(exc.error_class).inc()
            omitted = {name: int(v) for name, v in letter.headers if name.endswith(".omitted")}
            log(
                logger, logging.WARNING, "bad message dead-lettered",
                topic=record.topic, partition=record.partition, offset=record.offset,
                error_class=exc.error_class, reason=exc.reason, **({"omitted": omitted} if omitted else {}),
            )

    async def _send_letter(self, topic: str, record, letter: deadletter.DeadLetter) -> asyncio.Future:
        """One dead letter in a batch of its own. A letter with a short key goes where Kafka's partitioner
        puts the key; others go by the partition they came from (a bad record's key may be a megabyte:
        hashing it would block the loop, and caching it like the players' keys would keep it in memory)."""
        partitions = sorted(await self.producer.partitions_for(topic))
        if letter.key is not None and len(letter.key) <= DEAD_LETTER_KEY_HASHED:
            partition = partitions[(murmur2(letter.key) & 0x7FFFFFFF) % len(partitions)]
        else:
            partition = partitions[record.partition % len(partitions)]
        batch = self.producer.create_batch()
        batch.append(key=letter.key, value=letter.value, timestamp=None, headers=letter.headers)
        batch.close()
        return await self.producer.send_batch(batch, topic, partition=partition)
