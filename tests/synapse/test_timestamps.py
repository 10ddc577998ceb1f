"""synapse/timestamps.py: RFC 3339 or epoch seconds in, RFC 3339 UTC out; durations."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from synapse.timestamps import format_timestamp, parse_duration, parse_timestamp


@pytest.mark.parametrize("raw, expected", [
    ("2026-01-31T12:00:00Z", datetime(2026, 1, 31, 12, tzinfo=UTC)),
    ("2026-01-31T13:30:00+01:30", datetime(2026, 1, 31, 12, tzinfo=UTC)),
    (" 2026-01-31T12:00:00z ", datetime(2026, 1, 31, 12, tzinfo=UTC)),
    (1769860800, datetime(2026, 1, 31, 12, tzinfo=UTC)),
    ("1769860800.5", datetime(2026, 1, 31, 12, 0, 0, 500000, tzinfo=UTC)),
])
def test_rfc_3339_and_epoch_seconds_become_aware_utc(raw, expected):
    value = parse_timestamp(raw)
    assert value == expected and value.tzinfo == UTC


@pytest.mark.parametrize("raw, message", [
    ("2026-01-31T12:00:00", "time zone offset"),
    ("yesterday", "RFC 3339"),
    (True, "RFC 3339"),
    (None, "RFC 3339"),
    (1e12, "out of range"),
])
def test_what_is_not_a_timestamp_is_a_value_error_saying_why(raw, message):
    with pytest.raises(ValueError, match=message):
        parse_timestamp(raw)


def test_timestamps_are_written_in_utc_with_z():
    berlin = timezone(timedelta(hours=1))
    assert format_timestamp(datetime(2026, 1, 31, 13, tzinfo=berlin)) == "2026-01-31T12:00:00Z"
    assert format_timestamp(None) is None


@pytest.mark.parametrize("raw, seconds", [
    ("604800", 604800), ("7d", 604800), ("12h", 43200), ("30m", 1800), ("45s", 45),
    ("2w", 1209600), (" 3 d ", 259200),
])
def test_durations_take_seconds_or_a_unit(raw, seconds):
    assert parse_duration(raw) == timedelta(seconds=seconds)


@pytest.mark.parametrize("raw", ["", "7 days", "-1d", "1y", "1.5h", "9999999999"])
def test_anything_else_is_not_a_duration(raw):
    with pytest.raises(ValueError, match="Use seconds"):
        parse_duration(raw)
