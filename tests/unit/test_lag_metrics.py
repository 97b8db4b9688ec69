"""Consumer lag is reported only for the partitions a worker owns."""

from aiokafka import TopicPartition

from worker.config import load
from worker.observability import Metrics
from worker.pipeline.monitors import LagMonitor


def test_partitions_taken_away_stop_being_reported():
    metrics = Metrics()
    cfg = load(env={"DATABASE_URL": "postgresql://x@localhost/db", "KAFKA_BOOTSTRAP_SERVERS": "localhost:9092"})
    lag = LagMonitor(consumer=None, config=cfg, metrics=metrics, retrier=None)
    for p in range(3):
        metrics.consumer_lag.labels("games.finished", str(p)).set(10 * p)
    lag.forget([TopicPartition("games.finished", 1), TopicPartition("games.finished", 7)])
    reported = {s.labels["partition"] for m in metrics.registry.collect() if m.name == "rating_worker_consumer_lag"
                for s in m.samples}
    assert reported == {"0", "2"}
