"""The outbox relay: publishes the changes a crash left committed but unpublished.

A batch's changes are committed with an outbox row each; the live path publishes them and takes the
rows out. A crash in between leaves rows behind, and every worker's relay publishes those (at
start-up all of them, then the rows older than RELAY_MIN_AGE_S, every RELAY_INTERVAL_S), rebuilding
each change's bytes from its columns (worker.contract.changed.encode_change): the same bytes and id as
the first time, so consumers drop the rare duplicate.
"""

from __future__ import annotations

import logging

from aiokafka.errors import KafkaError

from worker.config import Config
from worker.observability import Metrics, log
from worker.pipeline.publisher import Publisher
from worker.pipeline.retry import DB_ERRORS, Abandoned, Retrier
from worker.store.base import StateStore

__all__ = ["Relay"]

logger = logging.getLogger("rating_worker.pipeline")

BATCH = 1000


class Relay:
    def __init__(self, store: StateStore, publisher: Publisher, config: Config, metrics: Metrics,
                 retrier: Retrier) -> None:
        self.store = store
        self.publisher = publisher
        self.config = config
        self.metrics = metrics
        self.retrier = retrier

    async def relay_once(self, min_age_s: float) -> int:
        """Publish up to BATCH unpublished changes at least `min_age_s` old; how many there were."""
        rows = await self.store.unpublished(BATCH, min_age_s)
        if not rows:
            return 0
        await self.retrier.broker("relay publish", lambda: self.publisher.send_keyed(
            self.config.kafka_output_topic, [(r.player_id.encode(), r.payload) for r in rows]))
        await self.store.mark_published([r.row_id for r in rows])
        log(logger, logging.INFO, "relay published changes left unpublished", count=len(rows))
        return len(rows)

    async def run(self) -> None:
        """Until the stop: relay, report the backlog, wait RELAY_INTERVAL_S. A failure is retried then."""
        min_age = 0.0  # at start-up, everything unpublished is a crash's leftover
        while not self.retrier.stopping.is_set():
            try:
                while await self.relay_once(min_age) >= BATCH:
                    pass
                self.metrics.outbox_backlog.set(await self.store.outbox_backlog())
            except DB_ERRORS + (KafkaError, Abandoned) as exc:  # Abandoned: a stop or drain cut a retry short
                log(logger, logging.WARNING, "relay failed, will retry", error=repr(exc))
            min_age = self.config.relay_min_age_s
            await self.retrier.sleep(self.config.relay_interval_s)
