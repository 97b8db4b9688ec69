"""The streaming shell: records from Kafka -> batches in PostgreSQL -> rating.changed and offsets.

- loop: `Pipeline` (start, run, stop, drain, launch, complete) and the commit order, written once
- intake: what is taken from the consumer (nothing skipped after a failed fetch; unreadable records)
- inflight: a batch in flight and the ordering chain that keeps batches in consumption order
- database: a batch's database stage, planned ahead and retried until it commits
- completion: what follows a commit (dead letters, publishing, offsets), for a batch and a sweep's chunk
- retry: the retry policy (`is_transient`, backoff, when to give up)
- publisher: rating.changed keyed by player, and dead letters
- relay: the outbox relay; monitors: the lag and the broker probe
- retention: expired processed ids and unrated rows removed, the tables' sizes read; their windows checked
  against the input topics' retention.ms at start
- rebalance: the consumer group (revocations, assignments, a failed join); faults: the test-only seam
- tasks: the side tasks (relay, lag, probe, retention) started by name and supervised

Knows nothing about rating math (worker.engine) nor about byte formats (worker.contract).
"""

from worker.pipeline.loop import Pipeline
from worker.pipeline.retry import DB_ERRORS, Abandoned, Stopping, is_transient

__all__ = ["DB_ERRORS", "Abandoned", "Pipeline", "Stopping", "is_transient"]
