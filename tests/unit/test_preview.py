"""Points at stake (worker.engine.preview): each result's stakes are what the engine publishes when that game is
rated, on the in-memory store, and it writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from worker.engine import apply_batch, apply_messages
from worker.engine.preview import PREVIEWS, NotRatable, PreviewUnsupported, points_at_stake
from worker.ratings import csr, fide, uscf
from worker.ratings.inputs import (
    AccountClosed,
    EventFinished,
    EventGame,
    EventPlayer,
    GameFinished,
    Message,
    PeriodClosed,
    RatingImported,
    TimeControl,
)
from worker.ratings.reasons import EXPLAINED
from worker.ratings.state import StateKey
from worker.store.memory import MemoryStore

DAY = 86400.0
T0 = datetime(2026, 1, 5, tzinfo=UTC).timestamp()
RESULTS = {"win": ("1-0", "0-1"), "draw": ("1/2-1/2", "1/2-1/2"), "loss": ("0-1", "1-0")}  # White's, Black's


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


BLITZ = TimeControl(180, 2)


def game(gid: str, white: str, black: str, result: str, at: float, tc: TimeControl = BLITZ) -> Message:
    return Message("/platform", gid, "game.finished", _iso(at),
                   GameFinished(gid, True, "standard", tc, white, black, result, at), gid)


def fide_game(gid: str, rating_type: str, white: str, black: str, result: str, at: float) -> Message:
    event = EventFinished(gid, "fide", True, at, (EventPlayer(white), EventPlayer(black)),
                          (EventGame(1, white, black, result),), time_control_minutes=90, time_control_increment=30,
                          rating_type=rating_type, started_at=at - 3600)
    return Message("/platform", gid, "event.finished", _iso(at), event, gid)


def uscf_game(gid: str, white: str, black: str, result: str, at: float) -> Message:
    event = EventFinished(gid, "uscf", True, at, (EventPlayer(white), EventPlayer(black)),
                          (EventGame(1, white, black, result),), time_control_minutes=120, time_control_increment=0)
    return Message("/platform", gid, "event.finished", _iso(at), event, gid)


def imported(system: str, category: str, player: str, rating: float, at: float = T0, **kw) -> Message:
    return Message("/platform", f"import-{system}-{category}-{player}", "rating.imported", _iso(at),
                   RatingImported(player, system, category, rating, at, **kw))


def closure(player: str, at: float) -> Message:
    return Message("/platform", f"close-{player}", "account.closed", _iso(at), AccountClosed(player, "fair_play", at))


async def store_of(setup: list[Message]) -> MemoryStore:
    store = MemoryStore()
    result = await apply_messages(store, setup, chunk=1)
    assert set(result.outcomes) <= {"applied", "unrated"}, result.messages
    return store


async def stakes(setup: list[Message], system: str, category: str, white: str, black: str, at: float) -> dict:
    store = await store_of(setup)
    async with store.reader() as reader:
        return await points_at_stake(reader, system, category, white, black, at)


async def published(setup: list[Message], played: Message, players: tuple[str, str], system: str,
                    category: str) -> list[float | None]:
    """What the worker publishes as each player's `delta` when it rates `played` after `setup` (his last record:
    a FIDE close of an earlier period comes first)."""
    store = await store_of(setup)
    before = len(store.history)
    await apply_batch(store, [played])
    records = store.history[before:]
    out = []
    for player in players:
        mine = [r for r in records if r.key == StateKey(player, system, category)]
        out.append(orjson.loads(mine[-1].payload)["data"]["delta"] if mine else UNCHANGED)
    return out


UNCHANGED = "no record"


async def assert_engine_agrees(setup, system, category, white, black, at, make) -> dict:
    """Every stake equals the delta the engine publishes for that game (`make(gid, result)`), both sides; where
    it publishes nothing for a player, his stake is 0 or None (he has no rating)."""
    got = await stakes(setup, system, category, white, black, at)
    for name, (white_result, black_result) in RESULTS.items():
        by_white = await published(setup, make(f"w-{name}", white_result), (white, black), system, category)
        by_black = await published(setup, make(f"b-{name}", black_result), (white, black), system, category)
        for side, engine in (("white", by_white[0]), ("black", by_black[1])):
            if engine == UNCHANGED:
                assert got[side][name] in (0.0, None), (side, name)
            else:
                assert got[side][name] == engine, (side, name)
    return got


# --- CSR -------------------------------------------------------------------------------------------------------

def csr_history() -> list[Message]:
    """anna and bob: 6 blitz games; anna and carl: 5 rapid games (anna's bullet starts from both speeds)."""
    out = [game(f"blitz-{i}", *(("anna", "bob") if i % 2 else ("bob", "anna")), ("1-0", "1/2-1/2", "0-1")[i % 3],
                T0 + i * DAY) for i in range(6)]
    out += [game(f"rapid-{i}", "anna", "carl", ("1-0", "1-0", "0-1")[i % 3], T0 + (6 + i) * DAY, TimeControl(600, 5))
            for i in range(5)]
    return out


LAST = T0 + 10 * DAY  # the last game of csr_history


@pytest.mark.parametrize("category", csr.CATEGORIES)
async def test_csr_stakes_are_what_the_engine_publishes_in_every_category(category):
    tc = csr.SAMPLE_TIME_CONTROLS[category]
    at = LAST + 3 * DAY
    got = await assert_engine_agrees(csr_history(), "csr", category, "anna", "bob", at,
                                     lambda gid, r: game(gid, "anna", "bob", r, at, tc))
    assert got["white"]["win"] > 0 > got["white"]["loss"] and got["white"]["reason"] is None


def test_the_sample_time_controls_are_of_their_categories():
    assert {c: csr.category(tc) for c, tc in csr.SAMPLE_TIME_CONTROLS.items()} == {c: c for c in csr.CATEGORIES}
    assert {c: uscf.categories_for(*tc) for c, tc in uscf.SAMPLE_TIME_CONTROLS.items()} == {
        c: (c,) for c in uscf.CATEGORIES}


async def test_a_category_never_played_starts_from_the_other_speeds():
    at = LAST + DAY
    got = await assert_engine_agrees(csr_history(), "csr", "bullet", "anna", "dave", at,
                                     lambda gid, r: game(gid, "anna", "dave", r, at, TimeControl(60, 0)))
    # Not what two players starting from 1500 / 350 / 0.06 would get: anna's blitz and rapid count.
    fresh = csr.rate_game(csr.hypothetical_game("bullet", "anna", "dave", "1-0", at), {})
    assert got["white"]["win"] != pytest.approx(fresh.changes[0].delta)


async def test_two_newcomers_start_from_1500_350_006():
    got = await stakes([], "csr", "blitz", "dave", "erin", T0)
    for name, (white_result, black_result) in RESULTS.items():
        white = csr.rate_game(game("g", "dave", "erin", white_result, T0).payload, {}).changes[0]
        black = csr.rate_game(game("g", "dave", "erin", black_result, T0).payload, {}).changes[1]
        assert white.before[:3] == black.before[:3] == (1500.0, 350.0, 0.06)
        assert (got["white"][name], got["black"][name]) == (white.delta, black.delta)


async def test_white_gains_less_for_a_win_than_black_between_equals():
    as_white = await stakes([], "csr", "blitz", "dave", "erin", T0)
    as_black = await stakes([], "csr", "blitz", "erin", "dave", T0)
    assert 0 < as_white["white"]["win"] < as_black["black"]["win"]
    assert as_white["white"]["draw"] < 0 < as_white["black"]["draw"]  # a draw is a good result for Black


async def test_a_long_break_grows_the_rd_and_the_stakes():
    soon = await stakes(csr_history(), "csr", "blitz", "anna", "bob", LAST + DAY)
    late = await stakes(csr_history(), "csr", "blitz", "anna", "bob", LAST + 400 * DAY)
    assert late["white"]["win"] > soon["white"]["win"] > 0
    assert late["white"]["loss"] < soon["white"]["loss"] < 0


async def test_a_time_before_the_last_game_counts_as_the_present():
    last_blitz = T0 + 5 * DAY  # their last game in the category
    earlier = await stakes(csr_history(), "csr", "blitz", "anna", "bob", T0 - 30 * DAY)
    assert earlier == await stakes(csr_history(), "csr", "blitz", "anna", "bob", last_blitz)
    assert earlier != await stakes(csr_history(), "csr", "blitz", "anna", "bob", last_blitz + DAY)


async def test_it_writes_nothing():
    store = await store_of(csr_history())
    states, history, messages = dict(store.states), list(store.history), dict(store.messages)
    async with store.reader() as reader:
        await points_at_stake(reader, "csr", "bullet", "anna", "bob", LAST + DAY)
        await points_at_stake(reader, "csr", "blitz", "anna", "zed", LAST + DAY)
    assert (dict(store.states), store.history, store.messages) == (states, history, messages)


async def test_a_closed_account_or_the_same_player_is_not_ratable():
    with pytest.raises(NotRatable) as closed:
        await stakes(csr_history() + [closure("bob", LAST + DAY)], "csr", "blitz", "anna", "bob", LAST + 2 * DAY)
    assert closed.value.reason == "closed_account" and closed.value.left_out == (("bob", "closed_account"),)
    assert closed.value.explanation == EXPLAINED["closed_account"]
    with pytest.raises(NotRatable) as same:
        await stakes([], "csr", "blitz", "anna", "anna", T0)
    assert same.value.reason == "same_player" and same.value.explanation == EXPLAINED["same_player"]


@pytest.mark.parametrize("system,category", [("tsr", "turbo"), ("chesskite", "puzzle"), ("chesstempo", "blitz"),
                                             ("csr", "puzzle"), ("fide", "bullet"), ("nope", "blitz")])
async def test_other_systems_and_categories_are_unsupported(system, category):
    with pytest.raises(PreviewUnsupported) as e:
        await stakes([], system, category, "anna", "bob", T0)
    assert "csr (bullet, blitz" in str(e.value) and "fide (standard, rapid, blitz)" in str(e.value)


def test_the_supported_systems_are_declared():
    assert PREVIEWS == {"csr": csr.CATEGORIES, "fide": fide.CATEGORIES, "uscf": uscf.CATEGORIES}


# --- FIDE ------------------------------------------------------------------------------------------------------

def fide_lists() -> list[Message]:
    """Players on a list, each with his K (section 8.3.3): top 10, club and weak 20, new and junior 40."""
    return [imported("fide", "standard", "top", 2400, games=200),
            imported("fide", "standard", "club", 2000, games=100),
            imported("fide", "standard", "weak", 1900, games=100),
            imported("fide", "standard", "new", 1900, games=10),
            imported("fide", "standard", "junior", 1900, games=100, birth_year=2012)]


def fide_stakes_expected(k: int, own: float, opponent: float) -> dict:
    pd = fide.expected_score(own, opponent)
    return {"win": pytest.approx(k * (1 - pd)), "draw": pytest.approx(k * (0.5 - pd)), "loss": pytest.approx(-k * pd),
            "reason": None}


@pytest.mark.parametrize("white,black,k_white,k_black", [("top", "club", 10, 20), ("new", "club", 40, 20),
                                                         ("club", "junior", 20, 40), ("weak", "club", 20, 20)])
async def test_fide_stakes_use_each_player_s_k(white, black, k_white, k_black):
    at = T0 + 10 * DAY
    rating = {"top": 2400, "club": 2000, "weak": 1900, "new": 1900, "junior": 1900}
    got = await assert_engine_agrees(fide_lists(), "fide", "standard", white, black, at,
                                     lambda gid, r: fide_game(gid, "standard", white, black, r, at))
    assert got["white"] == fide_stakes_expected(k_white, rating[white], rating[black])
    assert got["black"] == fide_stakes_expected(k_black, rating[black], rating[white])


async def test_fide_400_point_rule_for_the_stronger_player():
    at = T0 + 10 * DAY
    versus_2000 = await stakes(fide_lists(), "fide", "standard", "top", "club", at)
    versus_1900 = await stakes(fide_lists(), "fide", "standard", "top", "weak", at)
    assert versus_1900["white"] == versus_2000["white"]
    assert fide.pd_higher(500) != fide.pd_higher(400)  # without the rule they would differ


async def test_fide_stakes_in_an_open_period_and_after_it_are_the_event_s_change():
    """club has played this period (K fixed, n counts); later, his period closes first and is not at stake."""
    setup = fide_lists() + [fide_game("played", "standard", "club", "weak", "1-0", T0 + 5 * DAY)]
    for at in (T0 + 9 * DAY, T0 + 70 * DAY):
        await assert_engine_agrees(setup, "fide", "standard", "club", "top", at,
                                   lambda gid, r, at=at: fide_game(gid, "standard", "club", "top", r, at))


async def test_fide_unrated_opponents():
    at = T0 + 10 * DAY
    got = await assert_engine_agrees(fide_lists(), "fide", "standard", "top", "nobody", at,
                                     lambda gid, r: fide_game(gid, "standard", "top", "nobody", r, at))
    assert got["white"] == {"win": 0.0, "draw": 0.0, "loss": 0.0, "reason": "unrated_opponent"}
    assert got["black"] == {"win": None, "draw": None, "loss": None, "reason": None}  # pooled: no rating yet
    with pytest.raises(NotRatable) as e:
        await stakes(fide_lists(), "fide", "standard", "nobody", "anybody", at)
    assert e.value.reason == "unrated_opponent"


async def test_fide_rapid_600_points_apart_above_2600_is_not_ratable():
    setup = [imported("fide", "rapid", "gm", 2700, games=300), imported("fide", "rapid", "club", 2000, games=100)]
    with pytest.raises(NotRatable) as e:
        await stakes(setup, "fide", "rapid", "gm", "club", T0 + DAY)
    assert e.value.reason == "rating_gap_600" and dict(e.value.left_out) == {"gm": "rating_gap_600",
                                                                           "club": "rating_gap_600"}


async def test_fide_rapid_newcomers_are_rated_with_their_standard_rating():
    """top has no rapid rating: his standard one rates the game for club; his own first rapid record has no
    `before` rating, so its delta is null, and so are his stakes."""
    at = T0 + 10 * DAY
    setup = fide_lists() + [imported("fide", "rapid", "club", 1950, games=100)]
    got = await assert_engine_agrees(setup, "fide", "rapid", "top", "club", at,
                                     lambda gid, r: fide_game(gid, "rapid", "top", "club", r, at))
    assert got["black"] == fide_stakes_expected(20, 1950, 2400)
    assert got["white"] == {"win": None, "draw": None, "loss": None, "reason": None}


async def test_fide_a_time_before_the_last_game_counts_as_the_present():
    """club's last game is on 10 February, after the February list (his January win over top: 2018 and 2391 on
    it): a game "on 10 January" is rated as one of today, with the list of February, not with January's."""
    feb_1 = datetime(2026, 2, 1, tzinfo=UTC).timestamp()
    setup = fide_lists() + [
        fide_game("january", "standard", "club", "top", "1-0", T0 + 5 * DAY),
        Message("/platform", "list-2026-02", "rating.period_closed", _iso(feb_1), PeriodClosed("fide", "2026-02", feb_1)),
        fide_game("february", "standard", "club", "new", "1/2-1/2", feb_1 + 9 * DAY)]
    today = await assert_engine_agrees(setup, "fide", "standard", "club", "top", feb_1 + 9 * DAY,
                                       lambda gid, r: fide_game(gid, "standard", "club", "top", r, feb_1 + 9 * DAY))
    assert await stakes(setup, "fide", "standard", "club", "top", T0 + 5 * DAY) == today
    assert fide.expected_score(2018, 2391) != fide.expected_score(2000, 2400)  # the lists differ for the game


# --- US Chess --------------------------------------------------------------------------------------------------

async def test_us_chess_stakes_are_what_the_engine_publishes():
    setup = [imported("uscf", "regular", "ann", 1850, games=60), imported("uscf", "regular", "ben", 1700, games=12)]
    at = T0 + 3 * DAY
    got = await assert_engine_agrees(setup, "uscf", "regular", "ann", "ben", at,
                                     lambda gid, r: uscf_game(gid, "ann", "ben", r, at))
    assert got["white"]["win"] > 0 > got["white"]["loss"]
