"""The test-only fault seam: RATING_WORKER_FAULT makes the process SIGKILL itself at one point.

RATING_WORKER_FAULT=kill_after_commit[:N] | kill_after_publish[:N] kills the process in its N-th batch
(default the first): after the batch's database commit (nothing published, no offset committed), or
after its changes are published and taken out of the outbox (offsets not committed);
kill_after_sweep_chunk[:N] after the N-th chunk of a sweep (FIDE's monthly list) committed and was
published (the sweep cut short, its message not yet recorded processed). Read once, when
the pipeline is built; unset, it costs one comparison per batch.
"""

from __future__ import annotations

import logging
import os
import signal

from worker.observability import log

__all__ = ["FAULT_POINTS", "Faults"]

logger = logging.getLogger("rating_worker.pipeline")

FAULT_POINTS = ("kill_after_commit", "kill_after_publish", "kill_after_sweep_chunk")


def fault_from_env() -> tuple[str, int] | None:
    raw = os.environ.get("RATING_WORKER_FAULT", "").strip()
    if not raw:
        return None
    point, _, n = raw.partition(":")
    if point not in FAULT_POINTS or not (n or "1").isdigit() or int(n or "1") < 1:
        raise ValueError(f"RATING_WORKER_FAULT={raw!r}: expected one of {', '.join(FAULT_POINTS)}, then :N or not")
    return point, int(n or "1")


class Faults:
    def __init__(self) -> None:
        self.fault = fault_from_env()

    def at(self, point: str, batch: int) -> None:
        """Called at `point` of the `batch`-th batch (or chunk): SIGKILL if that is the fault asked for."""
        if self.fault is not None and self.fault == (point, batch):
            log(logger, logging.WARNING, "fault injected (RATING_WORKER_FAULT): SIGKILL", point=point, batch=batch)
            os.kill(os.getpid(), signal.SIGKILL)
