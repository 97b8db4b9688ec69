"""The state port: where ratings, history (the outbox) and processed message ids live."""
