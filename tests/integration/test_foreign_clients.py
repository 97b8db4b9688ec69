"""The worker with Kafka clients this project did not write: every input record becomes a rating or a dead
letter, nothing is lost and nothing stalls, whatever a platform's clients send, and what the worker writes
reads back with theirs.

The foreign clients: confluent-kafka (librdkafka) produces and consumes, the CNCF `cloudevents` SDK encodes
events in both content modes of its Kafka binding and decodes the worker's output, and `jsonschema` (the
reference validator, Draft 2020-12, formats checked) validates that output against schemas/. No mocks: the
real embedded PostgreSQL and the real embedded broker (Tansu).

confluent-kafka's calls block (flush, poll): they run in a thread, never on the event loop the worker
under test runs on (a blocked loop would miss its heartbeats and lose its group).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaClient
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.protocol.fetch import FetchRequest
from cloudevents.v1.http import CloudEvent
from cloudevents.v1.kafka import KafkaMessage, from_structured, to_binary, to_structured
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from jsonschema import Draft202012Validator, FormatChecker

from tests.integration.harness import Topics, committed_offsets, make_topics, new_database, worker_config
from worker.commands.run import run_service
from worker.dev.streams import game_event, games, player_of

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Kafka's record batch attributes, low 3 bits (record format v2)
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
STRUCTURED = b"application/cloudevents+json"
UNICODE_PLAYERS = ["jürgen", "李小龍", "\U0001f600-fan"]


# ---------------------------------------------------------------------------------------------
# Plumbing


@contextlib.asynccontextmanager
async def running_worker(cfg):
    """The worker in this event loop (tests/integration/test_worker_end_to_end.py's pattern): it must start,
    still be running when the block ends, and exit 0 when asked to stop."""
    started, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_service(cfg, started=started, stop_event=stop, install_signals=False))
    waiter = asyncio.create_task(started.wait())
    await asyncio.wait([task, waiter], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task.done():
        task.result()  # raises the start-up error
    try:
        yield task
        assert not task.done(), f"the worker stopped by itself: {task.result()!r}"
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0


async def fetch(database_url: str, sql: str) -> list:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


async def processed(database_url: str) -> set[tuple[str, str]]:
    return {(r["source"], r["id"]) for r in await fetch(database_url, "SELECT source, id FROM processed_messages")}


async def wait_for_ids(database_url: str, expected: set, timeout: float = 60) -> set:
    deadline = time.monotonic() + timeout
    while (seen := await processed(database_url)) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    return seen


def ids(values) -> set[tuple[str, str]]:
    return {(e["source"], e["id"]) for e in map(orjson.loads, values)}


@dataclass
class Out:
    """One record as a confluent-kafka Consumer returned it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _confluent_produce(bootstrap: str, topic: str, records: list[dict], settings: dict) -> list[tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **settings})
    delivered: list = [None] * len(records)

    def report(i):
        def on_delivery(err, msg):
            delivered[i] = err if err is not None else (msg.partition(), msg.offset())
        return on_delivery

    for i, r in enumerate(records):
        kwargs = {k: r[k] for k in ("key", "headers", "partition") if k in r}
        producer.produce(topic, value=r.get("value"), on_delivery=report(i), **kwargs)
        producer.poll(0)
    assert producer.flush(30) == 0, "confluent-kafka could not deliver everything in 30 s"
    failed = [(i, d) for i, d in enumerate(delivered) if not isinstance(d, tuple)]
    assert not failed, failed
    return delivered


async def confluent_produce(bootstrap: str, topic: str, records: list[dict], **settings) -> list[tuple[int, int]]:
    """Produce with a confluent-kafka Producer; (partition, offset) of each record, from its delivery report."""
    return await asyncio.to_thread(_confluent_produce, bootstrap, topic, records, settings)


def _confluent_read(bootstrap: str, topic: str, partitions: int, at_least: int, timeout: float) -> list[Out]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"foreign-reader-{time.monotonic_ns()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
        "check.crcs": True,  # librdkafka verifies the CRC-32C of every batch (aiokafka's, the worker's)
    })
    consumer.assign([CTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[Out] = []
    try:
        deadline = time.monotonic() + timeout
        quiet_until = None
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if len(out) >= at_least:
                    quiet_until = quiet_until or time.monotonic() + 1.0  # and whatever else is there now
                    if time.monotonic() > quiet_until:
                        break
                continue
            assert msg.error() is None, msg.error()
            quiet_until = None
            out.append(Out(msg.partition(), msg.offset(), msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    return sorted(out, key=lambda r: (r.partition, r.offset))


async def confluent_read(bootstrap: str, topic: str, partitions: int, at_least: int, timeout: float = 30) -> list[Out]:
    """Every record of the topic from the start with a confluent-kafka Consumer (assigned, outside any group)."""
    return await asyncio.to_thread(_confluent_read, bootstrap, topic, partitions, at_least, timeout)


async def batch_codecs(bootstrap: str, topic: str, partition: int) -> set[int]:
    """The codecs of the record batches stored in a partition, as the broker hands them out (raw fetch)."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        await client.force_metadata_update()
        node = client.cluster.leader_for_partition(AioTopicPartition(topic, partition))
        request = FetchRequest(100, 1, 50_000_000, 0, [(topic, [(partition, 0, 50_000_000)])])
        response = await client.send(node, request)
    finally:
        await client.close()
    data = response.topics[0][1][0][-1]
    codecs, pos = set(), 0
    while pos + 23 <= len(data):  # base offset 8, length 4, epoch 4, magic 1, crc 4, attributes 2
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if pos + 12 + length > len(data):
            break  # a partial batch at the end of the answer
        assert data[pos + 16] == 2, "not record format v2"
        codecs.add(int.from_bytes(data[pos + 21:pos + 23], "big") & 0x07)
        pos += 12 + length
    return codecs


def headers_of(out: Out) -> dict[str, bytes | None]:
    return dict(out.headers)


# ---------------------------------------------------------------------------------------------
# 1 (and 5): a stream produced with every codec librdkafka has


@dataclass
class CodecRun:
    bootstrap: str
    topics: Topics
    database_url: str
    values: dict[str, list[bytes]]  # codec -> the games produced with it
    rated: set
    output: list[Out]
    codecs_stored: dict[str, set[int]]


@pytest.fixture(scope="module")
async def codec_run(broker, postgres, template_db) -> CodecRun:
    """One worker rating games that five confluent-kafka producers sent, one per compression.type, each to
    a partition of its own (so that the batches stored there can be checked for the codec)."""
    topics = await make_topics(broker, partitions=len(CODECS))
    database_url = await new_database(postgres, template_db)
    values = {codec: games(24, players=10, seed=40 + i, source=f"/codec/{codec}") for i, codec in enumerate(CODECS)}
    # and players whose ids are not ASCII: their UTF-8 bytes are the output's keys
    pairs = list(zip(UNICODE_PLAYERS, UNICODE_PLAYERS[1:] + UNICODE_PLAYERS[:1], strict=True))
    values["none"] += [orjson.dumps(game_event(100 + k, w, b, "1-0", datetime(2026, 1, 2, tzinfo=UTC)
                                               + timedelta(minutes=k), source="/codec/none"))
                       for k, (w, b) in enumerate(pairs)]
    for p, codec in enumerate(CODECS):
        await confluent_produce(broker.bootstrap_servers, topics.input,
                                [{"value": v, "key": player_of(v), "partition": p} for v in values[codec]],
                                **{"compression.type": codec, "linger.ms": 50})
    stored = {codec: await batch_codecs(broker.bootstrap_servers, topics.input, p) for p, codec in enumerate(CODECS)}
    expected = set().union(*(ids(v) for v in values.values()))
    # the worker writes zstd (aiokafka with cramjam), for librdkafka to read in test 5
    cfg = worker_config(database_url, broker, topics, batch_size=200, kafka_compression_type="zstd")
    async with running_worker(cfg):
        rated = await wait_for_ids(database_url, expected)
        # every game changes two csr ratings: white's and black's
        output = await confluent_read(broker.bootstrap_servers, topics.output, 3, at_least=2 * len(expected))
    return CodecRun(broker.bootstrap_servers, topics, database_url, values, rated, output, stored)


async def test_every_codec_of_a_librdkafka_producer_is_rated(codec_run):
    run = codec_run
    # librdkafka really compressed: each partition holds batches of its codec only
    assert run.codecs_stored == {codec: {CODEC_IDS[codec]} for codec in CODECS}, run.codecs_stored
    for codec, values in run.values.items():
        missing = ids(values) - run.rated
        assert not missing, f"{codec}: {len(missing)} of {len(values)} games never rated"
    total = sum(len(v) for v in run.values.values())
    assert len(run.rated) == total
    # and ratings.changed records appeared for the games of every codec
    causes = {orjson.loads(r.value)["data"]["cause"]["source"] for r in run.output}
    assert causes == {f"/codec/{codec}" for codec in CODECS}
    assert len(run.output) == 2 * total
    # and nothing is left behind: every partition committed to its end
    committed = await committed_offsets(run.bootstrap, run.topics.input, run.topics.group, len(CODECS))
    assert committed == {p: len(run.values[codec]) for p, codec in enumerate(CODECS)}, committed


# ---------------------------------------------------------------------------------------------
# 2: binary and structured mode


def cloud_events(n: int, players: int, seed: int) -> list[CloudEvent]:
    """Game events as cloudevents SDK objects, every attribute explicit."""
    out = []
    for raw in games(n, players=players, seed=seed, source="/sdk/games"):
        e = orjson.loads(raw)
        out.append(CloudEvent({"id": e["id"], "source": e["source"], "type": e["type"], "time": e["time"],
                               "specversion": "1.0", "datacontenttype": "application/json"}, e["data"]))
    return out


def white_of(event) -> str:
    return event.get_data()["white"]["player_id"]


async def test_binary_and_structured_mode_give_the_same_ratings(broker, postgres, template_db):
    events = cloud_events(40, players=8, seed=21)
    modes = {"binary": to_binary, "structured": to_structured}
    runs = {}
    for mode, encode in modes.items():
        messages = [encode(e, key_mapper=white_of) for e in events]
        if mode == "binary":
            assert all("ce_specversion" in m.headers and m.headers["content-type"] == b"application/json"
                       for m in messages)
        else:
            assert all(m.headers == {"content-type": b"application/json"} for m in messages)
        runs[mode] = (await make_topics(broker), await new_database(postgres, template_db), messages)
        await confluent_produce(broker.bootstrap_servers, runs[mode][0].input,
                                [{"value": m.value, "key": m.key, "headers": list(m.headers.items())}
                                 for m in messages])
    expected = {(e["source"], e["id"]) for e in events}
    results = {}
    async with contextlib.AsyncExitStack() as stack:
        for topics, database_url, _ in runs.values():  # both workers at once, each on its own topics
            await stack.enter_async_context(running_worker(worker_config(database_url, broker, topics)))
        for mode, (topics, database_url, _) in runs.items():
            assert await wait_for_ids(database_url, expected) == expected, mode
            out = await confluent_read(broker.bootstrap_servers, topics.output, 3, at_least=2 * len(events))
            dead = await confluent_read(broker.bootstrap_servers, topics.dlq, 1, at_least=0, timeout=2)
            results[mode] = (out, dead)
    ratings = {}
    for mode, (_, database_url, _) in runs.items():
        rows = await fetch(database_url, "SELECT (to_jsonb(r) - 'updated_at')::text AS row FROM ratings r")
        ratings[mode] = sorted(orjson.dumps(orjson.loads(r["row"]), option=orjson.OPT_SORT_KEYS) for r in rows)
    assert results["binary"][1] == [] and results["structured"][1] == []  # nothing dead-lettered
    assert {orjson.loads(r)["player_id"] for r in ratings["binary"]} == {f"p{i:03d}" for i in range(8)}
    assert ratings["binary"] == ratings["structured"]

    def changes(out: list[Out]) -> list[tuple[bytes, int, bytes]]:
        return sorted((r.key, orjson.loads(r.value)["data"]["version"], r.value) for r in out)

    binary, structured = changes(results["binary"][0]), changes(results["structured"][0])
    assert len(binary) == 2 * len(events)
    assert binary == structured  # byte for byte


# ---------------------------------------------------------------------------------------------
# 3: bad and odd records, each one's fate

MAX_MESSAGE_BYTES = 65536  # the worker's limit in test 3: dead letters must fit 65536 + 65536 - 1024 bytes
T0 = datetime(2026, 3, 1, tzinfo=UTC)
OURS = ["error.class", "error.message", "source.topic", "source.partition", "source.offset", "source.headers"]


def event_bytes(i: int, white: str = "w", black: str = "b", source: str = "/odd", **data) -> bytes:
    e = game_event(i, white, black, "1-0", T0 + timedelta(minutes=i), source=source)
    e["data"].update(data)
    return orjson.dumps(e)


def padded_game(i: int, size: int) -> bytes:
    """A valid game of exactly `size` bytes (an unknown `data` field holds the padding)."""
    base = event_bytes(i, pgn="")
    value = event_bytes(i, pgn="x" * (size - len(base)))
    assert len(value) == size
    return value


def binary_headers(i: int, type_: str = "game.finished", source: str = "/odd-binary") -> list[tuple[str, bytes]]:
    stamp = (T0 + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    return [("ce_specversion", b"1.0"), ("ce_id", f"bin-{i}".encode()), ("ce_source", source.encode()),
            ("ce_type", type_.encode()), ("ce_time", stamp), ("content-type", b"application/json")]


def header_size(headers) -> int:
    """The bytes of a record's own headers, as error.headers.omitted gives them: names and values."""
    return sum(len(name.encode()) + len(value or b"") for name, value in headers)


@dataclass
class Odd:
    """A record for test 3 and what must become of it: rated (error None) or dead-lettered with `error`,
    its parts `omitted` (name -> size) and the others kept byte for byte."""

    name: str
    record: dict
    error: str | None = None
    omitted: dict[str, int] | None = None
    message: str = ""  # the start of error.message


def odd_records() -> list[Odd]:
    big_headers = [(f"x-blob-{n}", bytes([65 + n]) * 50_000) for n in range(3)] + [("x-small", b"s")]
    over = padded_game(901, 100_000)
    huge = b'{"pad":"' + b"y" * (300_000 - 10) + b'"}'
    assert len(huge) == 300_000
    bad_binary = orjson.dumps({**orjson.loads(event_bytes(902))["data"], "result": "2-0"})
    return [
        Odd("null key, null value", {"key": None, "value": None}, "invalid_json",
            message="record value: missing"),
        Odd("tombstone", {"key": b"tomb-1", "value": None}, "invalid_json", message="record value: missing"),
        Odd("empty value", {"key": b"empty-1", "value": b""}, "invalid_json", message="record value: invalid JSON"),
        Odd("valid game, 200 KB key", {"key": b"K" * 200_000, "value": event_bytes(903, "bigkey-w", "bigkey-b")}),
        Odd("valid game, exactly MAX_MESSAGE_BYTES", {"key": b"edge", "value": padded_game(904, MAX_MESSAGE_BYTES)}),
        Odd("valid game, a null and a non-UTF-8 header",
            {"key": b"hdr", "value": event_bytes(905), "headers": [("x-null", None), ("x-raw", b"\xff\xfe\x00")]}),
        Odd("valid game, 150 KB of headers", {"key": b"hdrs-ok", "value": event_bytes(907), "headers": big_headers}),
        # The largest part goes first: the 10-byte value, what an operator needs to see, is kept.
        Odd("bad JSON, 200 KB key", {"key": b"B" * 200_000, "value": b'{"not json'}, "invalid_json",
            {"error.key.omitted": 200_000}, "record value: invalid JSON"),
        Odd("one byte over MAX_MESSAGE_BYTES", {"key": b"edge+1", "value": padded_game(906, MAX_MESSAGE_BYTES + 1)},
            "too_large", {}, f"record value: {MAX_MESSAGE_BYTES + 1} bytes, over the limit of {MAX_MESSAGE_BYTES}"),
        Odd("100 KB value", {"key": b"big-100", "value": over}, "too_large", {},
            f"record value: 100000 bytes, over the limit of {MAX_MESSAGE_BYTES}"),
        Odd("300 KB value", {"key": b"big-300", "value": huge}, "too_large", {"error.value.omitted": 300_000},
            f"record value: 300000 bytes, over the limit of {MAX_MESSAGE_BYTES}"),
        # larger than the worker's fetch size per partition (1 MiB): the broker must hand it out whole
        Odd("2 MB value", {"key": b"big-2m", "value": b'"' + b"z" * 1_999_998 + b'"'}, "too_large",
            {"error.value.omitted": 2_000_000}, f"record value: 2000000 bytes, over the limit of {MAX_MESSAGE_BYTES}"),
        Odd("bad JSON, 150 KB of headers", {"key": b"hdrs", "value": b"not json", "headers": big_headers},
            "invalid_json", {"error.headers.omitted": header_size(big_headers)}, "record value: invalid JSON"),
        Odd("bad JSON with headers named like the worker's own",
            {"key": b"spoof", "value": b"[1,", "headers": [("error.class", b"spoofed"), ("source.offset", b"999999"),
                                                           ("source.headers", b"7")]},
            "invalid_json", {}, "record value: invalid JSON"),
        Odd("binary mode, invalid data", {"key": b"bin", "value": bad_binary, "headers": binary_headers(902)},
            "invalid_data", {}, "data.result: must be one of"),
        Odd("binary mode, an attribute header not UTF-8",
            {"key": b"bin-utf8", "value": event_bytes(908),
             "headers": [(k, b"/odd\xff" if k == "ce_source" else v) for k, v in binary_headers(908)]},
            "invalid_envelope", {}, "header ce_source: invalid UTF-8 at byte 4"),
    ]


def split_headers(letter: Out) -> tuple[list, list]:
    """A dead letter's headers -> (the record's own, the worker's), by its source.headers count."""
    own = int(headers_of(letter)["source.headers"])
    return letter.headers[:own], letter.headers[own:]


async def test_every_odd_record_is_rated_or_dead_lettered_whole_or_as_much_as_fits(database_url, broker, topics):
    odd = odd_records()
    goods = games(len(odd) + 1, players=6, seed=31, source="/odd-good")
    stream = [r for pair in zip(goods, odd, strict=False) for r in ({"value": pair[0], "key": player_of(pair[0])},
                                                                     pair[1].record)]
    stream.append({"value": goods[len(odd)], "key": player_of(goods[len(odd)])})
    delivered = await confluent_produce(broker.bootstrap_servers, topics.input, stream,
                                        **{"message.max.bytes": 10_000_000})
    offset_of = {id(r): o for r, (_, o) in zip(stream, delivered, strict=True)}
    assert [o for _, o in delivered] == list(range(len(stream)))

    rated = ids(goods) | ids([o.record["value"] for o in odd if o.error is None])
    bad = [o for o in odd if o.error is not None]
    cfg = worker_config(database_url, broker, topics, max_message_bytes=MAX_MESSAGE_BYTES,
                        kafka_compression_type="lz4")
    async with running_worker(cfg):
        seen = await wait_for_ids(database_url, rated)
        dead = await confluent_read(broker.bootstrap_servers, topics.dlq, 1, at_least=len(bad))
        # not stalled: a game sent after all of them is rated too
        late = games(1, players=2, seed=32, source="/odd-late")
        await confluent_produce(broker.bootstrap_servers, topics.input, [{"value": late[0]}])
        assert await wait_for_ids(database_url, rated | ids(late)) == rated | ids(late)
    assert seen == rated, f"never rated: {sorted(rated - seen)}, unexpected: {sorted(seen - rated)}"
    committed = await committed_offsets(broker.bootstrap_servers, topics.input, topics.group, 1)
    assert committed == {0: len(stream) + 1}, committed

    assert len(dead) == len(bad), [headers_of(d).get("source.offset") for d in dead]
    assert await batch_codecs(broker.bootstrap_servers, topics.dlq, 0) == {CODEC_IDS["lz4"]}
    by_offset = {int(headers_of(d)["source.offset"]): d for d in dead}
    for o in bad:
        offset = offset_of[id(o.record)]
        letter = by_offset.get(offset)
        assert letter is not None, f"{o.name}: no dead letter"
        own, ours = split_headers(letter)
        h = dict(ours)
        omitted = {name: int(v) for name, v in ours if name.endswith(".omitted")}
        assert [name for name, _ in ours] == OURS + list(omitted), (o.name, ours)
        assert (h["error.class"].decode(), omitted) == (o.error, o.omitted or {}), o.name
        assert h["error.message"].decode().startswith(o.message), (o.name, h["error.message"])
        assert (h["source.topic"].decode(), int(h["source.partition"]), int(h["source.offset"])) == (
            topics.input, 0, offset), o.name
        # what was not left out is there byte for byte; what was is not there at all
        original = o.record
        want_value = None if "error.value.omitted" in omitted else original["value"]
        want_key = None if "error.key.omitted" in omitted else original["key"]
        want_headers = [] if "error.headers.omitted" in omitted else original.get("headers", [])
        assert (letter.value, letter.key, own) == (want_value, want_key, want_headers), o.name
        assert int(h["source.headers"]) == len(want_headers)
        # and it fits the producer's request, as the layout bounds a record (worker.contract.deadletter.record_size)
        size = 128 + len(letter.key or b"") + len(letter.value or b"") + header_size(letter.headers)
        assert size <= MAX_MESSAGE_BYTES + 65536 - 1024, (o.name, size)


LEAK_MARK, LEAK_KEY_BYTES = b"held-key:", 100_000


def _produce_big_keyed(bootstrap: str, topic: str, n: int) -> None:
    """n bad records with distinct 100 KB keys, made here and dropped here: this test holds none of them."""
    records = [{"key": LEAK_MARK + f"{i:04d}".encode() + b"k" * (LEAK_KEY_BYTES - len(LEAK_MARK) - 4),
                "value": b"not json"} for i in range(n)]
    _confluent_produce(bootstrap, topic, records, {"message.max.bytes": 10_000_000})


def keys_held_in_memory() -> int:
    """How many distinct 100 KB keys of _produce_big_keyed some object of this process still refers to."""
    gc.collect()
    found, seen = set(), set()
    todo = gc.get_objects()
    while todo:  # the tracked objects, and the containers the collector does not track (a dict of bytes)
        obj = todo.pop()
        for ref in gc.get_referents(obj):
            if type(ref) is bytes:
                if len(ref) == LEAK_KEY_BYTES and ref.startswith(LEAK_MARK):
                    found.add(ref[:len(LEAK_MARK) + 4])
            elif not gc.is_tracked(ref) and id(ref) not in seen and isinstance(ref, dict | list | tuple):
                seen.add(id(ref))
                todo.append(ref)
    return len(found)


async def test_the_large_keys_of_dead_letters_are_not_kept_in_memory(database_url, broker, topics):
    """A producer that sends bad records with large distinct keys (a bug that puts the payload in the key)
    must not grow the worker: each key is dead-lettered whole (it fits the request limit) and then let go."""
    n = 30
    await asyncio.to_thread(_produce_big_keyed, broker.bootstrap_servers, topics.input, n)
    cfg = worker_config(database_url, broker, topics, max_message_bytes=MAX_MESSAGE_BYTES)
    async with running_worker(cfg):
        dead = await confluent_read(broker.bootstrap_servers, topics.dlq, 1, at_least=n)
        assert len(dead) == n
        assert all(len(d.key) == LEAK_KEY_BYTES and d.key.startswith(LEAK_MARK) for d in dead)  # kept whole
        assert {headers_of(d)["error.class"] for d in dead} == {b"invalid_json"}
        del dead
        # games after them, so that no batch still in the pipeline's hands holds a bad record
        after = games(6, players=4, seed=33, source="/after-keys")
        await confluent_produce(broker.bootstrap_servers, topics.input, [{"value": v} for v in after])
        assert await wait_for_ids(database_url, ids(after)) == ids(after)
        await asyncio.sleep(0.5)
        held = keys_held_in_memory()
    assert held == 0, f"the running worker still holds {held} of the {n} keys ({held * LEAK_KEY_BYTES} bytes)"


# ---------------------------------------------------------------------------------------------
# 4: dlq replay


async def rating_worker(*args: str, bootstrap: str, dlq: str) -> subprocess.CompletedProcess:
    """`python -m worker ARGS` as an operator runs it, with only the broker and the dead-letter topic set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "DATABASE_"))}
    env |= {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_DLQ_TOPIC": dlq}
    return await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "worker", *args], env=env, cwd=ROOT,
                                   capture_output=True, timeout=60)


async def test_dlq_replay_resubmits_the_record_exactly(database_url, broker):
    topics = await make_topics(broker, partitions=2)
    own_headers = [
        *binary_headers(7, source="/replay"),
        ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("x-raw", b"\xff\xfe\x80not utf-8"),
        ("x-dup", b"first"),
        ("x-empty", b""),
        ("x-null", None),
        ("x-dup", b"second"),
    ]
    bad = {"key": b"\xff\x00k", "value": orjson.dumps({**orjson.loads(event_bytes(7))["data"], "result": "2-0"}),
           "headers": own_headers, "partition": 1}
    tombstone = {"key": b"gone", "value": None, "partition": 0}
    good = games(4, players=4, seed=51, source="/replay-good")
    stream = [{"value": v, "partition": i % 2} for i, v in enumerate(good)] + [bad, tombstone]
    delivered = await confluent_produce(broker.bootstrap_servers, topics.input, stream)
    source = dict(zip(("bad", "tombstone"), delivered[-2:], strict=True))
    async with running_worker(worker_config(database_url, broker, topics, kafka_compression_type="snappy")):
        assert await wait_for_ids(database_url, ids(good)) == ids(good)
        dead = await confluent_read(broker.bootstrap_servers, topics.dlq, 1, at_least=2)
    assert len(dead) == 2
    assert await batch_codecs(broker.bootstrap_servers, topics.dlq, 0) == {CODEC_IDS["snappy"]}
    letters = {(int(headers_of(d)["source.partition"]), int(headers_of(d)["source.offset"])): d for d in dead}
    letter, tomb = letters[source["bad"]], letters[source["tombstone"]]
    assert headers_of(letter)["error.class"] == b"invalid_data"
    assert (tomb.key, tomb.value, headers_of(tomb)["error.class"]) == (b"gone", None, b"invalid_json")

    # `dlq` lists both, the tombstone included
    listed = await rating_worker("dlq", "--json", bootstrap=broker.bootstrap_servers, dlq=topics.dlq)
    assert listed.returncode == 0, listed.stderr.decode()
    rows = {(r["source_partition"], r["source_offset"]): r for r in orjson.loads(listed.stdout)}
    assert set(rows) == {source["bad"], source["tombstone"]}
    assert rows[source["tombstone"]]["error_class"] == "invalid_json"
    assert rows[source["bad"]]["key_base64"] == base64.b64encode(b"\xff\x00k").decode()
    assert [h["name"] for h in rows[source["bad"]]["headers"]] == [name for name, _ in own_headers]

    # replay one, by its place in the dead-letter topic
    end = {p: max([o for (q, o) in delivered if q == p]) + 1 for p in (0, 1)}
    replayed = await rating_worker("dlq", "replay", "--offset", f"0:{letter.offset}",
                                   bootstrap=broker.bootstrap_servers, dlq=topics.dlq)
    assert replayed.returncode == 0, replayed.stderr.decode()
    assert b"re-submitted 1 dead letter(s)" in replayed.stdout, replayed.stdout
    records = await confluent_read(broker.bootstrap_servers, topics.input, 2, at_least=len(stream) + 1)
    new = [r for r in records if r.offset >= end[r.partition]]
    assert [(r.partition, r.offset) for r in new] == [(1, end[1])], new  # in the partition it came from
    again = new[0]
    assert again.value == bad["value"]
    assert again.key == b"\xff\x00k"
    assert again.headers == own_headers  # byte for byte and in order, none of the dead letter's own
    assert not [name for name, _ in again.headers if name.startswith(("error.", "source."))]

    # --all: the tombstone is skipped, saying why, and the command succeeds
    everything = await rating_worker("dlq", "replay", "--all", bootstrap=broker.bootstrap_servers, dlq=topics.dlq)
    assert everything.returncode == 0, everything.stderr.decode()
    err = everything.stderr.decode()
    assert f"skipping 0:{tomb.offset}: it has no value (the record was a tombstone)" in err, err
    assert b"re-submitted 1 dead letter(s), skipped 1" in everything.stdout, everything.stdout
    records = await confluent_read(broker.bootstrap_servers, topics.input, 2, at_least=len(stream) + 2)
    new = [r for r in records if r.offset >= end[r.partition]]
    assert [(r.partition, r.key, r.value, r.headers) for r in new] == [
        (1, bad["key"], bad["value"], own_headers)] * 2


# ---------------------------------------------------------------------------------------------
# 5: the output, read by foreign clients

_RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})")


def format_checker() -> FormatChecker:
    """Draft 2020-12's format checker. jsonschema checks `date-time` only when the optional rfc3339-validator
    package is installed (it is not in this venv: the format would pass unchecked), so a strict RFC 3339
    check is added when it is missing."""
    checker = Draft202012Validator.FORMAT_CHECKER
    if "date-time" in checker.checkers:
        return checker
    checker = FormatChecker(list(checker.checkers))

    @checker.checks("date-time", raises=ValueError)
    def date_time(text) -> bool:
        if not isinstance(text, str):
            return True
        if not _RFC3339.fullmatch(text):
            return False
        plain = re.sub(r":60(?=[.Zz+-])", ":59", text.upper().replace("Z", "+00:00"))  # a leap second
        datetime.fromisoformat(plain)  # a real day and time
        return True

    return checker


def validator(name: str) -> Draft202012Validator:
    schema = orjson.loads((SCHEMAS / name).read_bytes())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=format_checker())


async def test_the_output_reads_with_foreign_clients_and_is_partitioned_like_the_java_client(codec_run, broker):
    run = codec_run
    envelope, changed = validator("envelope.json"), validator("rating.changed.json")
    assert not envelope.is_valid({"specversion": "1.0", "id": "x", "source": "/s", "type": "t", "data": {},
                                  "time": "2026-02-30T00:00:00Z"}), "date-time is not checked"
    assert run.output, "no rating.changed records"
    for r in run.output:
        assert ("content-type", STRUCTURED) in r.headers, r.headers
        event = from_structured(KafkaMessage(dict(r.headers), r.key, r.value))
        raw = orjson.loads(r.value)
        envelope.validate(raw)
        changed.validate(raw["data"])
        # the SDK reads the same event
        assert (event["specversion"], event["id"], event["source"], event["type"], event["time"]) == (
            "1.0", raw["id"], raw["source"], "rating.changed", raw["time"])
        assert event.get_data() == raw["data"]
        # keyed by the player, UTF-8, and the subject says the same
        player = raw["data"]["player_id"]
        assert r.key == player.encode("utf-8")
        assert event["subject"] == player
        # the SDK's view validates too, but for two attributes it makes up: partitionkey (the record key)
        # and datacontenttype, which cloudevents 2.2.0 takes from the content-type header even in structured
        # mode, where that header is the event format (application/cloudevents+json), not the data's type
        # (the envelope's own datacontenttype, application/json, is replaced)
        attributes = {k: v for k, v in event.get_attributes().items()
                      if k not in ("datacontenttype", "partitionkey")}
        envelope.validate({**attributes, "data": event.get_data()})
    # written zstd-compressed by the worker, read by librdkafka (CRCs checked)
    assert {c for p in range(3) for c in await batch_codecs(run.bootstrap, run.topics.output, p)} == {
        CODEC_IDS["zstd"]}
    ids_out = [orjson.loads(r.value)["id"] for r in run.output]
    assert len(set(ids_out)) == len(ids_out)

    # the partition of each key is the Java client's: murmur2 as librdkafka's murmur2_random computes it
    keys = sorted({r.key for r in run.output})
    assert {p.encode() for p in UNICODE_PLAYERS} <= set(keys)
    worker_partition = {r.key: r.partition for r in run.output}
    assert all(worker_partition[r.key] == r.partition for r in run.output)  # one partition per player
    probe = await make_topics(broker)  # its output topic has the same 3 partitions
    delivered = await confluent_produce(broker.bootstrap_servers, probe.output,
                                        [{"key": k, "value": b"x"} for k in keys], partitioner="murmur2_random")
    java = {k: p for k, (p, _) in zip(keys, delivered, strict=True)}
    assert java == worker_partition
    assert len(set(java.values())) > 1  # the keys are spread: the check can tell partitions apart


