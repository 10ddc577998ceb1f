"""Timestamps and durations as the API and the backup formats spell them (no DRF here)."""

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d{1,9})\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(raw: str) -> timedelta:
    """``604800``, ``7d``, ``12h``, ``30m``, ``45s``, ``2w`` → timedelta; ValueError otherwise."""
    match = _DURATION.match(str(raw))
    if not match:
        raise ValueError("Use seconds (604800) or a number with s, m, h, d or w (7d, 12h, 30m).")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def parse_timestamp(raw) -> datetime:
    """RFC 3339 string or Unix epoch seconds → aware UTC datetime; ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError("Expected an RFC 3339 timestamp or Unix epoch seconds.")
    if isinstance(raw, int | float) or (isinstance(raw, str) and
                                         re.fullmatch(r"-?\d+(\.\d+)?", raw.strip())):
        seconds = float(raw)
        if not -62135596800 < seconds < 253402300799:
            raise ValueError("Epoch seconds out of range.")
        return datetime.fromtimestamp(seconds, tz=UTC)
    if not isinstance(raw, str):
        raise ValueError("Expected an RFC 3339 timestamp or Unix epoch seconds.")
    text = raw.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("Expected an RFC 3339 timestamp (2026-01-31T12:00:00Z) or Unix "
                         "epoch seconds.") from None
    if value.tzinfo is None:
        raise ValueError("The timestamp needs a time zone offset, e.g. Z or +01:00.")
    return value.astimezone(UTC)


def format_timestamp(value: datetime | None) -> str | None:
    """An aware datetime as RFC 3339 UTC with ``Z``; None stays None."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
