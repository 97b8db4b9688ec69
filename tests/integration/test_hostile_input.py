"""Hostile input against the real worker, broker and PostgreSQL (issue 9): SQL-looking player ids are stored
and published byte for byte, every kind of bad record is dead-lettered with its class and reason while the
rest of the stream is rated, and neither the logs nor the metrics show the database password or player ids."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import orjson

from tests.integration.harness import captured_logs, produce, read_topic, wait_processed, worker_config
from worker.commands.run import run_service
from worker.observability import Metrics

T = "2026-11-30T12:00:00Z"
HOSTILE_IDS = ["'; DROP TABLE ratings; --", "Robert'); DROP TABLE processed_messages;--", "' OR '1'='1", "$1",
               "%s", "\\", "a\u202eb", "\U0001f600" * 8, "x" * 128, "normal"]
PASSWORD = "Db-S3cr3t-pw"


def ce(i: str, type_: str, data: dict, **attributes) -> bytes:
    return orjson.dumps({"specversion": "1.0", "id": i, "source": "/hostile", "type": type_, "time": T,
                         "data": data, **attributes})


def game(i: str, white: str, black: str, **changes) -> bytes:
    return ce(i, "game.finished", {"game_id": i, "rated": True, "variant": "standard",
                                   "time_control": {"base_seconds": 300, "increment_seconds": 0},
                                   "white": {"player_id": white}, "black": {"player_id": black},
                                   "result": "1-0", "finished_at": T, **changes})


def good_messages() -> list[bytes]:
    ids = HOSTILE_IDS
    return [game(f"g{i}", w, b) for i, (w, b) in enumerate(zip(ids, ids[1:] + ids[:1], strict=True))]


# (record value, the error.class header, the start of the error.message header)
BAD = [
    (game("big", "p1", "p2", pgn="e4 " * 3000), "too_large", "record value: "),
    (game("nul", "p\x001", "p2"), "invalid_data", "data.white.player_id: must not contain the NUL character"),
    (game("utf", "p1", "p2").replace(b'"p1"', b'"p\xff1"'), "invalid_utf8", "record value: invalid UTF-8 at byte"),
    (b'{"a":' * 1100 + b"1" + b"}" * 1100, "invalid_json", "record value: JSON nested deeper than 1024 levels"),
    (game("inf", "p1", "p2").replace(b'"base_seconds":300', b'"base_seconds":1e400'), "invalid_json",
     "record value: a number too large for a 64-bit float"),
    (game("future", "p1", "p2", finished_at="2027-01-01T00:00:00Z"), "invalid_rule",
     "data.finished_at: 2027-01-01T00:00:00Z is more than a day after the envelope's time"),
    (game("past", "p1", "p2", finished_at="1969-07-20T20:17:40Z"), "invalid_data",
     "data.finished_at: must not be before 1970-01-01T00:00:00Z"),
    (game("long", "p" * 129, "p2"), "invalid_data", "data.white.player_id: must be at most 128 characters long"),
    (game("self", "p1", "p1"), "invalid_rule", "data.black.player_id: a player may not meet himself"),
    (ce("twice", "event.finished", {"competition_id": "c", "kind": "uscf", "rated": True, "finished_at": T,
                                    "time_control": {"base_minutes": 90, "increment_seconds": 30},
                                    "players": [{"player_id": "p1"}, {"player_id": "p2"}, {"player_id": "p1"}],
                                    "games": [{"round": 1, "white": "p1", "black": "p2", "result": "1-0"}]}),
     "invalid_rule", "data.players[2].player_id: 'p1' is listed more than once"),
]


def with_password(url: str) -> tuple[str, str]:
    """The URL with a password in it (the embedded PostgreSQL trusts its user and ignores it), and the password."""
    parts = urlsplit(url)
    if parts.password:
        return url, parts.password
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user or 'postgres'}:{PASSWORD}@{host}")), PASSWORD


async def test_hostile_input_through_the_real_worker(database_url, broker, topics):
    url, password = with_password(database_url)
    cfg = worker_config(url, broker, topics, max_message_bytes=8192, batch_size=50)
    values = [v for pair in zip(good_messages(), [b for b, _, _ in BAD], strict=False) for v in pair]
    values += good_messages()[len(BAD):]
    await produce(broker.bootstrap_servers, topics.input, values)
    metrics = Metrics()
    started, stop = asyncio.Event(), asyncio.Event()
    with captured_logs() as logs:
        task = asyncio.create_task(run_service(cfg, started=started, stop_event=stop, metrics=metrics,
                                               install_signals=False))
        try:
            await asyncio.wait_for(started.wait(), 60)
            assert await wait_processed(url, len(HOSTILE_IDS)) == len(HOSTILE_IDS)
            dead = await read_topic(broker.bootstrap_servers, topics.dlq, at_least=len(BAD))
            published = await read_topic(broker.bootstrap_servers, topics.output, at_least=2 * len(HOSTILE_IDS))
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 60) == 0

    # Every bad record dead-lettered, bytes unchanged, with its class and reason.
    assert len(dead) == len(BAD)
    by_value = {r.value: dict(r.headers) for r in dead}
    for value, error_class, reason in BAD:
        headers = by_value[value]
        assert headers["error.class"].decode() == error_class
        assert headers["error.message"].decode().startswith(reason), headers["error.message"]

    # SQL-looking ids are stored and published exactly, and the tables they name are still there.
    conn = await asyncpg.connect(url)
    try:
        stored = {r["player_id"] for r in await conn.fetch("SELECT DISTINCT player_id FROM ratings")}
        assert await conn.fetchval("SELECT count(*) FROM processed_messages") == len(HOSTILE_IDS)
    finally:
        await conn.close()
    assert stored == set(HOSTILE_IDS)
    assert {orjson.loads(r.value)["data"]["player_id"] for r in published} == set(HOSTILE_IDS)
    assert all(r.key == orjson.loads(r.value)["data"]["player_id"].encode() for r in published)

    # The password shows nowhere; the worker's start-up line is there.
    text = logs.getvalue()
    assert password not in text
    lines = [orjson.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(line["msg"] == "worker started" for line in lines)

    # Metrics: no label value is a player id (or anything of a message but its type and error class).
    for family in metrics.registry.collect():
        for sample in family.samples:
            for value in sample.labels.values():
                assert value not in HOSTILE_IDS and password not in value
                assert len(value) <= 64, (family.name, sample.labels)
