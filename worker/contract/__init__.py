"""Every byte format on the topics, and nothing else: what a record in means and what a record out is.

- decode: a Kafka record (value and headers) -> a valid `Message`, or `BadMessage`; `decode_rateable`
  also finds the system that rates it (the pipeline, the importer and `replay` use it)
- binding: the CloudEvents Kafka protocol binding (structured or binary mode)
- schemas, fastcheck, payloads, times, reasons: the JSON Schemas, the fast checks ahead of them, the
  payloads built from a valid `data`, times, and the words of a bad message's reason
- changed: `rating.changed` (ChangeRecord, its id, its bytes, its validation)
- deadletter: a dead letter written and read back

It imports nothing of the store, the engine or the pipeline (tests/test_architecture.py).
"""
