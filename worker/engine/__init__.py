"""Messages + states -> new states + changes, for a whole batch, through the state port.

- compute: the pure loop, one result per message
- reads: whom a batch locks, what it loads, the past games it needs
- plan: a batch computed ahead of its locks, and when that plan may be used
- batch: one batch in one store transaction (`apply_batch`: the worker and `replay` alike)

The engine knows the rating systems only through their declarations (worker.ratings.system), and
the store only through its port (worker.store.base); it knows nothing of Kafka.
"""

from worker.engine.batch import BatchHooks, apply_batch
from worker.engine.compute import BatchResult, Computed, MessageResult, compute, compute_stepwise
from worker.engine.plan import Plan, PlanOutcome, plan_batch

__all__ = ["BatchHooks", "BatchResult", "Computed", "MessageResult", "Plan", "PlanOutcome", "apply_batch", "compute",
           "compute_stepwise", "plan_batch"]
