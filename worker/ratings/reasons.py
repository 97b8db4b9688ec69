"""Why a valid message changed no rating: every reason word a rating system gives, in one sentence for
people (`rating-worker message`, `rating-worker player --history`, docs/ratings.md).

The words are the systems' (Outcome.unrated_reason for a whole message, Outcome.left_out for one
participant of a rated message); they are also the `reason` label of the unrated-messages metric.
"""

from __future__ import annotations

EXPLAINED: dict[str, str] = {
    # whole messages
    "casual": "the platform sent it as not rated (rated: false)",
    "variant": "a chess variant: CSR rates standard chess only",
    "guest": "a guest account played in it",
    "closed_account": "an account in it is closed for fair play (frozen): it changes nobody's rating",
    "not_challenge": "a ChessKite puzzle outside a challenge card (only challenge attempts are rated)",
    "too_fast": "US Chess: minutes + increment under 5 is not rated",
    "no_games": "no game of it could be rated",
    "free": "a free Turbo Live event (format free) is not rated",
    "too_few_rated_players": "fewer than 2 players cast 10 or more votes",
    "no_rated_games": "FIDE: none of its games counted for anybody",
    "not_fair_play": "an account closed for another reason than fair play: nobody's rating changes",
    "already_closed": "the account was already closed for fair play: nothing more is refunded",
    # a game asked about (the read API's points at stake), not a message
    "same_player": "white and black are the same player: a player cannot play himself",
    # one participant of a rated message
    "too_few_votes": "fewer than 10 votes cast: neither rated nor anyone's opponent",
    "opponent_closed": "the opponent's account is closed for fair play",
    "unrated_opponent": "FIDE: games against opponents without a rating do not count for a rated player",
    "rating_gap_600": "FIDE rapid/blitz: 600 or more points apart with a player over 2600, not rated",
    "zero_score_first_event": "FIDE: a zero score in a newcomer's first event is disregarded",
}


def explain(reason: str | None) -> str:
    """The sentence for a reason word (the word itself for one this version does not know)."""
    if reason is None:
        return ""
    return EXPLAINED.get(reason, reason)
