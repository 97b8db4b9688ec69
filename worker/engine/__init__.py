"""Messages + states -> new states + changes, for a whole batch, through the state port.

- compute: the pure loop, one result per message
- reads: whom a batch locks, what it loads, the past games it needs
- plan: a batch computed ahead of its locks, and when that plan may be used
- batch: one batch in one store transaction (`apply_batch`: the worker and `replay` alike)
- sweep: a message that concerns every state of a system (FIDE's monthly list), in bounded chunks;
  `steps`: a run of messages with sweeps among them, cut into batches and sweeps; `apply_messages`: them
  applied in order
- preview: points at stake, a game not played yet rated once per result from the stored states, writing
  nothing (the read API's `/v1/preview`)

The engine knows the rating systems only through their declarations (worker.ratings.system), and
the store only through its port (worker.store.base); it knows nothing of Kafka.
"""

from worker.engine.batch import BatchHooks, apply_batch
from worker.engine.compute import BatchResult, Computed, MessageResult, compute, compute_stepwise
from worker.engine.plan import Plan, PlanOutcome, plan_batch
from worker.engine.sweep import Step, apply_messages, apply_sweep, is_sweep, segments, steps

__all__ = ["BatchHooks", "BatchResult", "Computed", "MessageResult", "Plan", "PlanOutcome", "Step", "apply_batch",
           "apply_messages", "apply_sweep", "compute", "compute_stepwise", "is_sweep", "plan_batch", "segments",
           "steps"]
