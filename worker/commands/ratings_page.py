"""docs/ratings.md, every number computed by the engine (seed 000's tables and each system's worked
examples); `rating-worker docs` (docs.py) writes it, and a test fails when the committed page is stale."""

from __future__ import annotations

import calendar

from worker.ratings import fide, registry
from worker.ratings.doctext import signed, table
from worker.ratings.parameters import changed_values


def fide_section() -> str:
    """Seed 001 and the research notes' FIDE numbers, from worker/ratings/fide.py."""
    edges, low = [], 0
    for top, _ in fide.TABLE_8_1_2:
        edges.append((low, top))
        low = top + 1
    expected = table(["Rating difference", "Higher rated: expected", "Lower rated: expected"],
                   [[f"{lo}–{hi}", f"{fide.pd_higher(lo) / 100:.2f}", f"{1 - fide.pd_higher(lo) / 100:.2f}"]
                    for lo, hi in edges])
    win, draw, loss = (20 * (s - fide.expected_score(1500, 1700)) for s in (1.0, 0.5, 0.0))
    k_rows = [["reached 2400 once", fide.k_factor(2350, 2405, 100, None, 2026)],
              ["junior (until the end of the year of the 18th birthday), never rated 2300 or more",
               fide.k_factor(1900, None, 100, 2010, 2026)],
              ["junior rated 2310 once, 2250 now (the peak decides)", fide.k_factor(2250, 2310, 100, 2010, 2026)],
              ["fewer than 30 games", fide.k_factor(1900, None, 12, None, 2026)],
              ["everyone else", fide.k_factor(1900, None, 100, None, 2026)],
              ["K 20 with 39 games in the period (K × n at most 700)", fide.capped_k(20, 39)]]
    pool = [(1900, 1.0), (1900, 1.0), (1900, 0.5), (1900, 0.5), (1907, 0.0)]
    return "\n\n".join([
        "## FIDE (standard, rapid, blitz)",
        "### Expected score (table 8.1.2; a difference over 400 counts as 400)", expected,
        "### K", table(["Player", "K"], k_rows),
        "An imported list rating carries the list's K (`k`: the K of the player's next period), and "
        "`ever_2300` / `ever_2400`; a K of 10 counts as ever 2400, a K of 10 or 20 without `games` as at least "
        "30 games.",
        f"### Example\n\n1500 against 1700 with K 20: expected {fide.expected_score(1500, 1700):.2f}; a win "
        f"{signed(win)}, a draw {signed(draw)}, a loss {signed(loss)}. Changes are summed over the month and "
        f"rounded half away from zero when it closes: −2.5 becomes {signed(fide.round_half_away(-2.5))}.",
        f"### First rating\n\n5 games, 3 points, opponents summing to {sum(r for r, _ in pool)}, with two "
        f"hypothetical 1800 draws: {fide.first_rating(pool)} (published only from 1400, at most 2200). The games "
        f"pooled for it span at most {fide.PARAMS.first_rating_months} months: older ones leave the pool.",
        "### Rating periods\n\nLists are published on the 1st of each month and close 3 days before: an event "
        f"ending on 26 February 2026 goes to the {_month_name(fide.list_period(_utc(2026, 2, 26)))} list, one ending "
        f"on 27 February to the {_month_name(fide.list_period(_utc(2026, 2, 27)))} list (unless it names its "
        "`rating_period`). Its expected scores use the list in force when it started (`started_at`): a "
        "tournament from 25 November to 3 December is rated with the November ratings even after the December "
        "list came out. A player's open period is closed, rounded, when he plays an event of a later list, "
        "and for everyone when the list itself is published (`rating.period_closed`, `rating-worker fide "
        f"close-period`): then ratings under 1400 are delisted, and a listed player with no rated game since "
        f"{_month_name(_month_before(12))} 2025 (12 months before the December 2026 list) is marked inactive, "
        "until his next game.",
        "### Rapid and blitz newcomers\n\nA player without a rapid (blitz) rating who holds a standard rating "
        "is rated with it, and his opponents' games against him are rated; his own rapid (blitz) rating starts "
        "from it and is published at his first close.",
        fide_2024(),
    ])


def fide_2024() -> str:
    """FIDE's change of 1 March 2024, with its numbers computed by the engine."""
    p = fide.PARAMS
    rows = [[r, fide.raised(r)] for r in (p.raise_from, 1200, 1500, 1801, p.raise_below, 2100)]
    return (
        f"### The change of 1 March 2024\n\nFrom the list of {_month_name(p.raise_list)} "
        f"{p.raise_list[:4]}, in standard, rapid and blitz, every published rating R from {p.raise_from} to "
        f"{p.raise_below - 1} was raised once to R + {float(p.raise_share)} × ({p.raise_below} − R), rounded as "
        f"a published rating, and the lowest rating moved from {p.listed_from_before} to {p.listed_from}. "
        "The worker applies both by list month: a period closing into that list is rated as usual, then "
        "raised; a rating of an earlier list with no such period is raised as a change of its own, at that "
        "list (or a later one) or at the player's first event of a later period. A rating is raised once. "
        "Imports of lists before it may be from 1000.\n\n"
        + table(["Published rating on the February 2024 list", "On the March 2024 list"], rows)
        + "\n\nNot modelled: the older regulations' formula for initial ratings, and their 400-point rule "
        "applied once per event. Events before March 2024 are rated with today's rules and the 1000 floor."
    )


def _utc(year: int, month: int, day: int) -> float:
    return float(calendar.timegm((year, month, day, 12, 0, 0)))


def _month_before(months: int) -> str:
    """The month of `fide.inactive_before` for the December 2026 list (checks the docs' example)."""
    return fide.month_of(fide.inactive_before("2026-12", fide.FideParams(inactive_after_months=months)))


def _month_name(period: str) -> str:
    return calendar.month_name[int(period[5:7])]


def _section(name: str) -> str:
    """The section of docs/ratings.md that a system's own module writes (its `docs`)."""
    docs = next(s.docs for s in registry.SYSTEMS if s.name == name)
    assert docs is not None, name
    return docs()


def parameter_sets() -> str:
    """Every system's dated parameter sets (worker.ratings.parameters), oldest first: what each changed."""
    rows = []
    for name, declarer in registry.DECLARERS.items():
        title = next((s.title for s in registry.SYSTEMS if s.name == name), "") or "Fair-play corrections"
        previous = None
        for chosen in declarer.sets:
            since = "the beginning" if chosen.effective_from is None else chosen.effective_from.replace("T00:00:00Z", "")
            if previous is None:
                changes = "the first set"
            else:
                changes = ", ".join(f"`{name}` {old} → {new}" for name, old, new in
                                    changed_values(previous.params, chosen.params)) or "no value"
            rows.append([title, f"`{chosen.name}`", since, f"{changes}: {chosen.note}"])
            previous = chosen
    return ("## Parameter sets\n\nEvery change of a system's parameters is a new set with the date it takes effect "
            "from. Each message is rated with the set in effect at its own time (never the day it is processed), so "
            "the ratings earned before a change are kept as they were, a replay of the same history gives the same "
            "answer on any day, and every `rating.changed` names the set that rated it (`parameters`).\n\n"
            + table(["System", "Set", "In effect from", "What changed"], rows))


def render() -> str:
    return "\n\n".join([
        "# Ratings\n\nGenerated by `rating-worker docs` from the engine in `worker/ratings/`: do not edit by hand. "
        "A test fails when this page is stale. Numbers are rounded for display; the worker stores and publishes "
        "unrounded values.",
        _section("csr"),
        _section("tsr"),
        _section("uscf"),
        fide_section(),
        _section("chesskite"),
        _section("chesstempo"),
        parameter_sets(),
    ]) + "\n"

