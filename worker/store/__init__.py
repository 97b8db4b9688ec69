"""The state port: where ratings, history (the outbox) and processed message ids live; and the operator's
reads of them (reads.py: OperatorReads, for the operator's commands and the read API)."""
