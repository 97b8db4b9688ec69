"""worker.pipeline.intake against a consumer double that behaves like aiokafka where it matters: a fetch that fails
after it moved the positions of the partitions it drained, and a partition whose record at one offset
cannot be read until it can. (The same cases against the real broker: tests/integration/test_no_record_skipped.py.)"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from worker.observability import Metrics, Readiness
from worker.pipeline.intake import UNREADABLE_RECHECK_S, Intake

A, B = TopicPartition("games", 0), TopicPartition("games", 1)


class Consumer:
    """Partitions of records 0..n-1; `bad` offsets raise when a read reaches them (with the positions of
    the partitions drained before it already moved, as aiokafka's getmany does)."""

    def __init__(self, sizes: dict[TopicPartition, int]) -> None:
        self.sizes = sizes
        self.positions = dict.fromkeys(sizes, 0)
        self.committed_offsets: dict[TopicPartition, int | None] = dict.fromkeys(sizes)
        self.bad: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self.fail_next_fetch = False

    def assignment(self):
        return set(self.sizes)

    def paused(self):
        return set(self._paused)

    def pause(self, *tps):
        self._paused.update(tps)

    def resume(self, *tps):
        self._paused.difference_update(tps)

    def seek(self, tp, offset):
        self.positions[tp] = offset

    async def seek_to_beginning(self, *tps):
        for tp in tps:
            self.positions[tp] = 0

    async def committed(self, tp):
        return self.committed_offsets[tp]

    async def position(self, tp):
        return self.positions[tp]

    def highwater(self, tp):
        return self.sizes[tp]

    async def getmany(self, *partitions, timeout_ms=0, max_records=None):
        out = {}
        for tp in sorted(partitions or self.sizes):
            if tp in self._paused:
                continue
            start, end = self.positions[tp], self.sizes[tp]
            if max_records is not None:
                end = min(end, start + max_records)
            bad = self.bad.get(tp)
            if bad is not None and start <= bad < end:
                raise ValueError(f"cannot decompress the batch at {bad}")  # positions of `out` moved already
            if start < end:
                out[tp] = [SimpleNamespace(offset=o, value=b"v") for o in range(start, end)]
                self.positions[tp] = end
            if self.fail_next_fetch and out:
                self.fail_next_fetch = False
                raise KafkaError("lost answer")
        return out


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


async def no_sleep(_: float) -> None:
    pass


def intake(consumer, clock=None) -> tuple[Intake, Metrics, Readiness]:
    metrics = Metrics()
    readiness = Readiness(metrics, reasons=())
    return Intake(consumer, metrics, readiness, no_sleep, probe_ms=0, clock=clock or Clock()), metrics, readiness


def offsets(records) -> dict[TopicPartition, list[int]]:
    return {tp: [r.offset for r in recs] for tp, recs in records.items()}


async def test_a_fetch_that_fails_after_moving_positions_gives_every_record_again():
    consumer = Consumer({A: 5, B: 5})
    taker, _, readiness = intake(consumer)
    assert offsets(await taker.take(0, 2)) == {A: [0, 1], B: [0, 1]}
    consumer.fail_next_fetch = True
    assert await taker.take(0, 2) == {}  # the answer is lost; A's position had moved to 4
    assert "broker: fetch" in readiness.reasons
    assert offsets(await taker.take(0, 10)) == {A: [2, 3, 4], B: [2, 3, 4]}
    assert readiness.ready


async def test_a_partition_with_an_unreadable_record_stops_there_and_the_others_go_on():
    consumer = Consumer({A: 6, B: 4})
    consumer.bad[A] = 3
    consumer.committed_offsets[A] = 1  # taken nothing yet: from the committed offset
    clock = Clock()
    taker, metrics, readiness = intake(consumer, clock)
    got = offsets(await taker.take(0, 100))
    assert got == {A: [1, 2], B: [0, 1, 2, 3]}  # up to the record that cannot be read, and all of B
    assert readiness.reasons == ["unreadable: games[0]@3"]
    assert metrics.registry.get_sample_value("rating_worker_unreadable_offset",
                                             {"topic": "games", "partition": "0"}) == 3
    assert taker.stopped() == {A} and A in consumer.paused()
    assert await taker.take(0, 100) == {}  # stopped, not retried in a loop
    clock.now += UNREADABLE_RECHECK_S
    assert await taker.take(0, 100) == {} and readiness.reasons == ["unreadable: games[0]@3"]  # still so
    del consumer.bad[A]  # e.g. the codec was installed
    clock.now += UNREADABLE_RECHECK_S
    assert offsets(await taker.take(0, 100)) == {A: [3, 4, 5]}  # from the record it stopped at: none skipped
    assert readiness.ready and taker.stopped() == set()
    assert metrics.registry.get_sample_value("rating_worker_unreadable_offset",
                                             {"topic": "games", "partition": "0"}) is None


async def test_after_batches_are_given_up_their_records_come_again_from_the_committed_offsets():
    consumer = Consumer({A: 10})
    taker, _, _ = intake(consumer)
    assert offsets(await taker.take(0, 4)) == {A: [0, 1, 2, 3]}
    consumer.committed_offsets[A] = 2  # the batch of 2 and 3 was abandoned uncommitted
    taker.rewind_to_committed()
    assert offsets(await taker.take(0, 4)) == {A: [2, 3, 4, 5]}


class WaitingConsumer(Consumer):
    """A fetch with nothing in it is held for its timeout, as a broker does."""

    async def getmany(self, *partitions, timeout_ms=0, max_records=None):
        out = await super().getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
        if not out:
            await asyncio.sleep(timeout_ms / 1000)
        return out


async def test_a_wait_cut_short_by_the_batch_ahead_never_drops_what_the_recovery_took():
    """take_before gives up only the fetch: here the fetch fails (B cannot be read), the recovery reads A
    alone (its records taken), then waits on C, empty, while the batch ahead ends. Cutting that short
    would drop A's records with A's position already past them."""
    c = TopicPartition("games", 2)
    consumer = WaitingConsumer({A: 5, B: 1, c: 0})
    consumer.bad[B] = 0
    metrics = Metrics()
    taker = Intake(consumer, metrics, Readiness(metrics, reasons=()), no_sleep, probe_ms=200, clock=Clock())
    busy = asyncio.ensure_future(asyncio.sleep(0.01))
    first = offsets(await taker.take_before(busy, 100))
    later = offsets(await taker.take(0, 100))
    assert first.get(A, []) + later.get(A, []) == [0, 1, 2, 3, 4]


async def test_a_wait_for_records_ends_with_the_batch_ahead_and_takes_nothing():
    consumer = WaitingConsumer({A: 0})
    taker, _, _ = intake(consumer)
    busy = asyncio.ensure_future(asyncio.sleep(0.01))
    assert await asyncio.wait_for(taker.take_before(busy, 100), 0.5) == {}  # not TAKE_BEHIND_MS
    consumer.sizes[A] = 3
    assert offsets(await taker.take_before(asyncio.ensure_future(asyncio.sleep(1)), 100)) == {A: [0, 1, 2]}
