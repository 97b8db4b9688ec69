"""rating-worker: a streaming rating service for chess platforms."""

__version__ = "0.1.0"
