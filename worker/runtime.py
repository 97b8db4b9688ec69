"""Process-wide settings of the commands that rate messages for a long time (run, replay, import, demo).

The garbage collector. CPython's cyclic collector runs a young-generation pass every 700 net
allocations of container objects, and the worker allocates millions of them (a 5,000-game batch builds
tens of thousands of states, changes and rows, nearly all freed by reference counting: none of them
form cycles). Measured with `./dev bench throughput` (100,000 games): the collector took ~20% of the
worker's CPU (8.5 s -> 6.4 s of worker CPU with the thresholds below; 6.3 s with the collector off),
for ~+20% games/s, and the worker's RSS did not grow (270-300 MB either way).

So: the objects alive after start-up (modules, compiled schemas, the registry) move to the permanent
generation, where no collection scans them again, and a young pass runs every 200,000 allocations.
Cycles (asyncio's futures and exceptions make a few) are still collected, just less often: a young one
waits at most 200,000 allocations, one that survived into the middle generation up to 50 young passes
(10 million allocations), an old one until the next full pass (100 middle passes, or sooner once the
survivors grow by a quarter, CPython's rule). The soak (`./dev bench soak`, 10 minutes) shows the RSS
flat with these settings.

Applied by `worker.cli.main`, the process's entry point, for the commands that rate messages; a test
that calls a command's function in its own process keeps that process's collector as it is.
"""

from __future__ import annotations

import gc

#: gc.set_threshold(young, middle, old): see the module docstring for the measurement.
GC_THRESHOLDS = (200_000, 50, 100)


_tuned = False


def tune_for_throughput() -> None:
    """Freeze what start-up allocated and collect young objects less often (see the module docstring).
    Once per process."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
