"""A history of messages rated outside the worker's streaming loop, as `replay`, `backfill` and `evaluate`
rate it.

- history: CloudEvents JSON lines (a file or stdin) decoded in order and run through the engine a chunk at
  a time, with what a chunk's result has to say on stderr; a stream's fair-play closures read first
- evaluation: how well ratings predicted results (log-loss, Brier score, calibration), pure

It imports neither the pipeline nor Kafka: a history needs no broker (tests/test_architecture.py).
"""
