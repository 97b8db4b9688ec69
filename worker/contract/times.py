"""Times in messages: RFC 3339 text <-> epoch seconds (float, UTC), and the normalized text form.

The worker never looks at the wall clock (a replay must give the same output): every time it keeps comes
from a message. Normalized text is `2026-11-30T12:00:00Z`, with microseconds only when there are some.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

__all__ = ["MIN_TIME", "MIN_TIME_TEXT", "format_time", "parse_normalized", "parse_time"]

MIN_TIME = 0.0  # 1970-01-01T00:00:00Z: no time in a message may be earlier
MIN_TIME_TEXT = "1970-01-01T00:00:00Z"

_EPOCH = datetime(1970, 1, 1)
_ONE_US = timedelta(microseconds=1)
# RFC 3339 section 5.6 date-time (with the offset required). [0-9], not \d: \d would take any
# Unicode digit. Leap seconds (:60) are accepted and count as the first second of the next minute.
_TIME_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"
)


def _format_utc(dt: datetime) -> str:
    """A naive UTC datetime as RFC 3339 text, microseconds only when non-zero."""
    text = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    if dt.microsecond:
        return f"{text}.{dt.microsecond:06d}Z"
    return text + "Z"


def _parse_slow(text: str) -> tuple[float, str]:
    """Any RFC 3339 date-time with offset -> (epoch seconds, normalized UTC text); ValueError if not."""
    m = _TIME_RE.fullmatch(text)
    if m is None:
        raise ValueError("not an RFC 3339 timestamp with offset, e.g. '2026-11-30T12:00:00Z'")
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = m.groups()
    second = int(second)
    leap = second == 60
    if second > 60:
        raise ValueError("second must be in 0..60")
    # Fractions finer than a microsecond are truncated (float epoch seconds cannot hold them anyway).
    micro = int((fraction or "")[:6].ljust(6, "0"))
    try:
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), 59 if leap else second, micro
        )
    except ValueError as exc:
        raise ValueError(f"not a real date and time ({exc})") from None
    utc = local
    if sign is not None:
        oh, om = int(off_h), int(off_m)
        if oh > 23 or om > 59:
            raise ValueError("the offset must be within -23:59..+23:59")
        offset = timedelta(hours=oh, minutes=om)
        utc = local - offset if sign == "+" else local + offset
    if leap:
        utc += timedelta(seconds=1)
    micros = (utc - _EPOCH) // _ONE_US
    return micros / 1_000_000, _format_utc(utc)


def parse_normalized(text: str) -> tuple[float, str]:
    """(epoch seconds, normalized text), with a fast path for text already in the normalized form."""
    if (
        len(text) == 20
        and text[19] == "Z"
        and text[10] == "T"
        and text[4] == text[7] == "-"
        and text[13] == text[16] == ":"
    ):
        try:
            # Python 3.11 parses the 'Z'; the regex of the schema has already checked the shape.
            return datetime.fromisoformat(text).timestamp(), text
        except ValueError:
            pass  # a leap second or an impossible date: the slow path says which
    try:
        return _parse_slow(text)
    except OverflowError:
        raise ValueError("outside the years 0001..9999 once converted to UTC") from None


def parse_time(text: str) -> float:
    """An RFC 3339 timestamp with offset -> epoch seconds (float, UTC). Raises ValueError if invalid.

    Lowercase 't'/'z' and any number of fraction digits are accepted (truncated to microseconds);
    a leap second (:60) counts as the first second of the next minute.
    """
    if not isinstance(text, str):
        raise ValueError("not a string")
    return parse_normalized(text)[0]


def format_time(epoch: float) -> str:
    """Epoch seconds -> RFC 3339 UTC text: `2026-11-30T12:00:00Z`, `2026-11-30T12:00:00.250000Z`.

    Rounded to the microsecond; `format_time(parse_time(t))` is the normalized form of `t`.
    Raises ValueError for NaN, infinities and times outside the years 0001..9999.
    """
    if not math.isfinite(epoch):
        raise ValueError(f"not a finite time: {epoch!r}")
    seconds = math.floor(epoch)
    micros = round((epoch - seconds) * 1_000_000)  # epoch - floor(epoch) is exact
    try:
        return _format_utc(_EPOCH + timedelta(seconds=seconds, microseconds=micros))
    except OverflowError:
        raise ValueError(f"time out of range: {epoch!r}") from None


