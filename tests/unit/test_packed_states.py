"""The replay's packed states (worker.store.packed): a dict's answers, to the type and the bit.

A state read back must be the state stored: the same floats (every bit: -0.0, the smallest and largest
doubles), the same Nones, and the same types (an import's int rating must not come back a float, or
`rating.changed` would say 1500.0 where the worker says 1500). Whatever the record cannot hold is kept
as it was given.
"""

from __future__ import annotations

import math
import struct
import sys

from hypothesis import given
from hypothesis import strategies as st

from worker.ratings.state import RatingState, StateKey
from worker.store.packed import PackedStates, pack, unpack


def same(a: RatingState, b: RatingState) -> bool:
    """Equal field by field, with the same types, and floats with the same bits (NaN == NaN, -0.0 != 0.0)."""
    def bits(x):
        return struct.pack("<d", x) if type(x) is float else x
    return len(a) == len(b) and all(type(x) is type(y) and bits(x) == bits(y) for x, y in zip(a, b, strict=True))


floats = st.floats(allow_nan=True, allow_infinity=True)
optional = st.none() | floats | st.integers(-10**6, 10**6)
counts = st.integers(-2**40, 2**40) | st.booleans()
states = st.builds(
    RatingState,
    rating=floats | st.integers(0, 3000),
    rd=optional, volatility=optional, games=counts, peak=optional, last_at=optional, version=counts,
    extra=st.none() | st.dictionaries(st.sampled_from(["w", "d", "l", "threshold"]), st.integers(0, 99), max_size=3),
)


@given(states)
def test_a_state_comes_back_as_it_was_stored(state: RatingState) -> None:
    assert same(unpack(pack(state)), state)


def test_the_common_states_are_packed() -> None:
    """Packing must happen for what replays keep most: Glicko states, with or without a peak, and Elo ones."""
    for state in (RatingState(1500.0, 350.0, 0.06),
                  RatingState(1712.25, 61.5, 0.0599, 31, 1700.0, 1.7e9, 31),
                  RatingState(1200.0, None, None, 7, None, 1.7e9 + 0.5, 7),
                  RatingState(-0.0, sys.float_info.min, sys.float_info.max, 2**31 - 1, -math.inf, 5e-324, 0)):
        packed = pack(state)
        assert type(packed) is bytes and len(packed) < 50
        assert same(unpack(packed), state)


def test_what_a_record_cannot_hold_is_kept_whole() -> None:
    for state in (RatingState(1500), RatingState(1500.0, 80), RatingState(1500.0, games=True),
                  RatingState(1500.0, games=2**31), RatingState(1500.0, extra={"w": 1})):
        assert pack(state) is state


keys = st.builds(StateKey, st.sampled_from(["u1", "u2", "problem:p1", ""]),
                 st.sampled_from(["csr", "chesstempo", "chesstempo-seen"]), st.sampled_from(["blitz", "rapid", "blitz/p1"]))


@given(st.lists(st.tuples(st.sampled_from(["set", "del", "update"]), keys, states), max_size=40))
def test_it_answers_as_a_dict_does(operations) -> None:
    packed, plain = PackedStates(), {}
    for operation, key, state in operations:
        if operation == "set":
            packed[key] = plain[key] = state
        elif operation == "update":
            packed.update({key: state})
            plain.update({key: state})
        elif key in plain:
            del packed[key], plain[key]
        assert len(packed) == len(plain)
        assert (key in packed) == (key in plain)
    assert sorted(packed) == sorted(plain)
    assert all(isinstance(k, StateKey) for k in packed)
    for key in plain:
        assert same(packed[key], plain[key]) and same(packed.get(key), plain[key])
    assert packed.get(StateKey("nobody", "csr", "blitz")) is None and "not a key" not in packed
    assert plain.keys() <= packed.keys() and packed.keys() <= plain.keys()  # the store's "any new key?" test
    for system in {k.system for k in plain}:
        assert sorted(packed.keys_of(system)) == sorted(k for k in plain if k.system == system)
    for system, category in {(k.system, k.category) for k in plain}:
        expected = {k.player_id: v for k, v in plain.items() if (k.system, k.category) == (system, category)}
        got = dict(packed.of(system, category))
        assert got.keys() == expected.keys() and all(same(got[p], expected[p]) for p in expected)


def test_it_is_built_and_updated_as_a_dict_is_and_a_failed_assignment_changes_nothing() -> None:
    key, other = StateKey("u1", "csr", "blitz"), StateKey("u2", "csr", "rapid")
    state = RatingState(1500.0, 350.0, 0.06)
    assert dict(PackedStates({key: state})) == dict(PackedStates([(key, state)])) == {key: state}
    packed = PackedStates()
    packed.update([(other, state)])
    packed.update()
    assert dict(packed) == {other: state}
    for bad_key, bad_state in ((StateKey(1, "csr", "blitz"), state), (key, "not a state"), (key, None)):
        try:
            packed[bad_key] = bad_state
        except (TypeError, ValueError):
            pass
        assert len(packed) == 1 and list(packed) == [other]
