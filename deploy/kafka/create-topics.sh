#!/bin/sh
# Create the worker's topics with their partition counts (idempotent: existing topics are left alone).
# Used by docker-compose.yml (the kafka-topics service); run it the same way from any host with the
# Kafka CLI, e.g. a Kubernetes Job on the apache/kafka image.
#
# Partitions bound parallelism: a consumer group gives each partition to one worker, so the busiest
# input topic's partition count is the most workers that can share its load. Choose it for the
# largest scale-out you expect; Kafka can add partitions later but not remove them (docs/deploy.md).
set -eu

KAFKA_TOPICS="${KAFKA_TOPICS_BIN:-/opt/kafka/bin/kafka-topics.sh}"
BOOTSTRAP="${KAFKA_BOOTSTRAP_SERVERS:-kafka:9092}"
RF="${REPLICATION_FACTOR:-1}"

create() {  # topic partitions [config...]
  topic="$1"; partitions="$2"; shift 2
  configs=""
  for c in "$@"; do configs="$configs --config $c"; done
  # shellcheck disable=SC2086 # configs is a list of words on purpose
  "$KAFKA_TOPICS" --bootstrap-server "$BOOTSTRAP" --create --if-not-exists \
    --topic "$topic" --partitions "$partitions" --replication-factor "$RF" $configs
}

# Input topics (KAFKA_INPUT_TOPICS). game.finished carries nearly all the traffic.
create games.finished    "${GAMES_PARTITIONS:-12}"
create events.finished   "${EVENTS_PARTITIONS:-6}"
create puzzles.attempted "${PUZZLES_PARTITIONS:-6}"
create accounts.closed   "${ACCOUNTS_PARTITIONS:-3}"
create ratings.imported  "${IMPORTS_PARTITIONS:-6}"
# Output (KAFKA_OUTPUT_TOPIC): rating.changed keyed by player_id, one partition per player.
create ratings.changed   "${CHANGED_PARTITIONS:-12}"
# Dead letters (KAFKA_DLQ_TOPIC): bad records, bytes unchanged; kept 30 days for inspection and re-submission.
create ratings.dlq       "${DLQ_PARTITIONS:-3}" retention.ms=2592000000

"$KAFKA_TOPICS" --bootstrap-server "$BOOTSTRAP" --describe \
  --topic 'games.finished|events.finished|puzzles.attempted|accounts.closed|ratings.imported|ratings.changed|ratings.dlq'
