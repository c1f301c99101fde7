"""Cursor values in order: what ``cursor_sort_key`` promises, whatever order it is asked in.

The key is computed for every record, twice (the stream's cursor, then the runtime's boundary),
so it remembers the value it was last asked about; these tests pin that remembering never hands
one value the key of another, from one thread or several.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from source_framework.streams.cursor import CursorValueError, cursor_sort_key
from unit_tests.conftest import threads_switching_often


def reference_key(value):
    """What the key means, written out the slow way."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return (2, value)
    return (1, parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC))


instants = st.datetimes(min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2040, 1, 1))
offsets = st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=2)), dt.timezone(dt.timedelta(hours=-5, minutes=-30))])


@st.composite
def date_time_texts(draw):
    """One instant written the ways APIs write them: Z, an offset, fractions, naive, date only."""
    instant = draw(instants).replace(tzinfo=dt.UTC)
    shown = instant.astimezone(draw(offsets))
    form = draw(st.sampled_from(["z", "offset", "fraction", "naive", "date", "space"]))
    if form == "z":
        return instant.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    if form == "offset":
        return shown.isoformat(timespec="seconds")
    if form == "fraction":
        return shown.isoformat(timespec="microseconds")
    if form == "naive":
        return instant.replace(tzinfo=None).isoformat(timespec="milliseconds")
    if form == "date":
        return instant.date().isoformat()
    return shown.isoformat(sep=" ")


cursor_values = st.one_of(
    date_time_texts(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", "2025", "2025-13-01T00:00:00Z", "20250101T000000Z", "abc", "9 lives"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(cursor_values, max_size=30), st.data())
def test_each_value_gets_its_own_key_whatever_was_asked_before(values, data):
    # Repeats in a row (the common case: twice per record), and values coming back later.
    asked = [value for value in values for _ in range(data.draw(st.integers(1, 3)))]
    asked += data.draw(st.permutations(values)) if values else []
    for value in asked:
        assert cursor_sort_key(value) == reference_key(value), value


@settings(max_examples=200, deadline=None)
@given(date_time_texts(), date_time_texts())
def test_date_times_order_by_the_instant_they_name_whatever_their_form(first, second):
    a, b = reference_key(first)[1], reference_key(second)[1]
    key_a, key_b = cursor_sort_key(first), cursor_sort_key(second)
    assert (key_a < key_b) == (a < b)
    assert (key_a == key_b) == (a == b)


def test_equal_strings_that_are_different_objects_get_the_same_key():
    text = "2025-03-04T05:06:07Z"
    copy = "".join(text)  # equal, not the same object
    assert cursor_sort_key(text) == cursor_sort_key(copy) == reference_key(text)


@pytest.mark.parametrize("value", [None, True, False, [1], {"a": 1}])
def test_values_that_cannot_order_a_cursor_are_refused(value):
    with pytest.raises(CursorValueError):
        cursor_sort_key(value, stream="orders")


def test_streams_read_at_once_never_get_each_others_keys():
    # Several streams sync in threads and order their cursors at the same time.
    def texts(hour):
        start = dt.datetime(2025, 1, 1, hour, tzinfo=dt.UTC)
        return [(start + dt.timedelta(seconds=s)).isoformat() for s in range(2_000)]

    wrong: list[str] = []

    def check(values):
        expected = [reference_key(v) for v in values]
        for _ in range(5):
            for value, key in zip(values, expected, strict=True):
                if cursor_sort_key(value) != key or cursor_sort_key(value) != key:
                    wrong.append(value)

    threads = [threading.Thread(target=check, args=(texts(hour),)) for hour in range(4)]
    with threads_switching_often():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert wrong == []


@pytest.mark.parametrize("value", [
    dt.datetime(2025, 3, 16, 12, 30, tzinfo=dt.UTC),
    dt.datetime(2025, 3, 16, 14, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    dt.datetime(2025, 3, 16, 12, 30),  # naive, as source-faker makes them
    dt.date(2025, 3, 16),
])
def test_a_cursor_value_a_python_connector_yields_orders_as_the_text_airbyte_cdk_prints_for_it(value):
    """A record's cursor may be a ``datetime`` (its state then holds the ISO text airbyte-cdk
    printed): both are the same instant, so the record at the state's cursor is known again."""
    import orjson

    printed = orjson.loads(orjson.dumps(value))
    assert cursor_sort_key(value) == cursor_sort_key(printed) == reference_key(printed)
