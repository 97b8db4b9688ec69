"""What the worker watches besides its batches: the consumer lag, and whether the broker answers.

- `LagMonitor` (every 5 s): `rating_worker_consumer_lag` per assigned partition, the topics' partition
  counts, and the records waiting (for the watchdog: `waiting`), leaving out the partitions stopped at
  a record they cannot read (they wait for an operator, not for this worker).
- `BrokerProbe` (every BROKER_PROBE_INTERVAL_S): one metadata request, given BROKER_PROBE_TIMEOUT_S to be
  answered. aiokafka keeps a fetch that cannot reach the broker to itself, so without it an idle worker
  (or one waiting in a publish) would look ready through a whole broker outage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiokafka.errors import IllegalStateError, KafkaError

from worker.config import Config
from worker.observability import Metrics, Readiness, log
from worker.pipeline.retry import Retrier

__all__ = ["BROKER_PROBE", "BrokerProbe", "LagMonitor"]

logger = logging.getLogger("rating_worker.pipeline")

LAG_INTERVAL_S = 5.0
BROKER_PROBE_INTERVAL_S = 5.0
BROKER_PROBE_TIMEOUT_S = 5.0
BROKER_PROBE = "broker: probe"


class LagMonitor:
    def __init__(self, consumer, config: Config, metrics: Metrics, retrier: Retrier,
                 stopped: Callable[[], set] = set) -> None:
        self.consumer = consumer
        self.config = config
        self.metrics = metrics
        self.retrier = retrier
        self._stopped = stopped  # the partitions stopped at a record they cannot read
        self.waiting = 0  # records waiting in the assigned partitions when last measured

    async def measure(self) -> None:
        total = 0
        stopped = self._stopped()
        for tp in self.consumer.assignment():
            end = self.consumer.highwater(tp)
            if end is not None:
                lag = end - await self.consumer.position(tp)
                self.metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(lag)
                if tp not in stopped:  # waiting for an operator, not for this worker
                    total += max(0, lag)
        self.waiting = total
        for topic in self.config.kafka_input_topics:
            partitions = self.consumer.partitions_for_topic(topic)
            if partitions is not None:
                self.metrics.topic_partitions.labels(topic).set(len(partitions))

    async def run(self) -> None:
        while not self.retrier.stopping.is_set():
            try:
                await self.measure()
            except (KafkaError, IllegalStateError):
                pass
            await self.retrier.sleep(LAG_INTERVAL_S)

    def forget(self, partitions) -> None:
        """Partitions taken away are another worker's to report: drop their lag series."""
        for tp in partitions:
            try:
                self.metrics.consumer_lag.remove(tp.topic, str(tp.partition))
            except KeyError:
                pass


class BrokerProbe:
    def __init__(self, consumer, readiness: Readiness, retrier: Retrier | None = None) -> None:
        self.consumer = consumer
        self.readiness = readiness
        self.retrier = retrier

    async def probe(self, timeout_s: float = BROKER_PROBE_TIMEOUT_S) -> bool:
        """One metadata request (the cluster's brokers and topics, answered by any broker); not ready
        while it fails or goes unanswered for `timeout_s`, ready again (as far as the probe goes) once it
        is answered. True when it was."""
        try:
            await asyncio.wait_for(self.consumer.topics(), timeout_s)
        except Exception as exc:  # noqa: BLE001 - whatever stops the request, the broker is not usable
            if self.readiness.fail(BROKER_PROBE):
                log(logger, logging.WARNING, "broker not answering a metadata request: not ready until it does",
                    error=repr(exc), timeout_s=timeout_s)
            return False
        if self.readiness.recover(BROKER_PROBE):
            log(logger, logging.INFO, "broker answering again")
        return True

    async def run(self) -> None:
        while not self.retrier.stopping.is_set():
            await self.probe()
            await self.retrier.sleep(BROKER_PROBE_INTERVAL_S)
