"""The consumer group: what happens when partitions come and go, and when the worker cannot join.

- Before partitions go (`on_partitions_revoked`), the batches in hand are applied, published and their
  offsets committed, or, when that cannot happen within DRAIN_TIMEOUT_S (a database or broker outage),
  abandoned uncommitted: the whole group waits for this worker meanwhile, and the abandoned records go
  to the partitions' next owner.
- Every new assignment is logged at INFO with the partitions gained and lost, and counted in
  `rating_worker_assigned_partitions` (an operator alerts when the workers own fewer than the topics have).
- A failed join (a member of another client that offers only assignors the worker lacks, ACLs, a
  session timeout the broker refuses) is one ERROR line per kind of trouble and a readiness reason
  until the worker joins; it counts as work for the watchdog, which restarts a worker kept out too long.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from aiokafka import ConsumerRebalanceListener, TopicPartition

from worker.config import Config
from worker.observability import Metrics, Readiness, log
from worker.pipeline.intake import group_trouble

if TYPE_CHECKING:
    from worker.pipeline.loop import Pipeline

__all__ = ["FinishBatchesBeforeRevoke", "Membership"]

logger = logging.getLogger("rating_worker.pipeline")


def _by_topic(partitions) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


class Membership:
    """This worker's place in its consumer group: its partitions, or why it has none."""

    def __init__(self, config: Config, metrics: Metrics, readiness: Readiness) -> None:
        self.config = config
        self.metrics = metrics
        self.readiness = readiness
        self.assignment: set[TopicPartition] = set()
        self.trouble: str | None = None  # the readiness reason while the worker cannot join

    def failed(self, exc: BaseException) -> None:
        """Not in the group (nothing is fetched): said once per kind of trouble, until it joins."""
        reason = group_trouble(exc)
        if reason == self.trouble:
            return
        if self.trouble is not None:
            self.readiness.recover(self.trouble)
        self.trouble = reason
        self.readiness.fail(reason)
        log(logger, logging.ERROR, "cannot join the consumer group: retrying, rating nothing meanwhile "
            "(docs/operations.md, 'Consumer group trouble')", group=self.config.kafka_group_id,
            error=repr(exc), reason=reason)

    def assigned(self, partitions) -> None:
        """The group's new assignment (after every rebalance): logged, counted, and the end of trouble."""
        new, old = set(partitions), self.assignment
        self.assignment = new
        if self.trouble is not None:
            self.readiness.recover(self.trouble)
            self.trouble = None
            log(logger, logging.INFO, "joined the consumer group", group=self.config.kafka_group_id)
        counts = Counter(tp.topic for tp in new)
        for topic in set(self.config.kafka_input_topics) | set(counts):
            self.metrics.assigned_partitions.labels(topic).set(counts.get(topic, 0))
        log(logger, logging.INFO, "partitions assigned", partitions=len(new), gained=_by_topic(new - old),
            lost=_by_topic(old - new))


class FinishBatchesBeforeRevoke(ConsumerRebalanceListener):
    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    async def on_partitions_revoked(self, revoked) -> None:
        # aiokafka only logs what a listener raises: a failure here must stop the pipeline itself,
        # or the next batch's offsets could be committed past messages that were never applied.
        try:
            await self._pipeline.drain(self._pipeline.config.drain_timeout_s)
        except BaseException as exc:  # noqa: BLE001 - handed to the pipeline, which re-raises it
            self._pipeline.halt(exc)
        self._pipeline.forget_partitions(revoked)

    async def on_partitions_assigned(self, assigned) -> None:
        self._pipeline.membership.assigned(assigned)
