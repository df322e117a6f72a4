"""The relative-date resolver: phrases resolved against the date they were said."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from bara.memory.dates import annotate, fmt_day, parse_session_date, resolve_relative

MONDAY = date(2023, 5, 8)  # LoCoMo conv-26 session 1 ("1:56 pm on 8 May, 2023") was a Monday


@pytest.mark.parametrize("text,value", [
    ("I went to a support group yesterday", "7 May 2023"),
    ("see you tomorrow", "9 May 2023"),
    ("I ran a race today", "8 May 2023"),
    ("the day before yesterday was fun", "6 May 2023"),
    ("we went camping last Saturday", "6 May 2023"),
    ("last Monday I quit", "1 May 2023"),  # strictly before the anchor, even on the same weekday
    ("next Friday is the show", "12 May 2023"),
    ("next Monday we start", "15 May 2023"),
    ("two weeks ago I painted", "24 April 2023"),
    ("3 days ago", "5 May 2023"),
    ("a week ago", "1 May 2023"),
    ("a few days ago", "around 5 May 2023"),
    ("a couple of days ago", "around 6 May 2023"),
    ("two months ago", "March 2023"),
    ("a year ago", "2022"),
    ("last year I started", "2022"),
    ("next year maybe", "2024"),
    ("this year", "2023"),
    ("next month we move", "June 2023"),
    ("last month", "April 2023"),
    ("last week", "the week of 1 May 2023"),
    ("next week", "the week of 15 May 2023"),
    ("last weekend", "the weekend of 6 May 2023"),
    ("this weekend", "the weekend of 13 May 2023"),
    ("in 3 days", "11 May 2023"),
    ("in two weeks", "22 May 2023"),
    ("last summer", "summer 2022"),
    ("next summer", "summer 2023"),
])
def test_phrases_resolve_against_the_anchor(text, value):
    found = resolve_relative(text, MONDAY)
    assert [r.value for r in found] == [value]


def test_month_ends_and_leap_years():
    assert resolve_relative("yesterday", date(2024, 3, 1))[0].value == "29 February 2024"
    assert resolve_relative("next month", date(2023, 12, 15))[0].value == "January 2024"
    assert resolve_relative("a month ago", date(2023, 3, 31))[0].value == "February 2023"
    assert resolve_relative("last Sunday", date(2023, 1, 2))[0].value == "1 January 2023"


def test_annotate_writes_the_date_next_to_the_phrase_and_keeps_the_words():
    text = "Went to a support group yesterday, and next month we go to Paris."
    out = annotate(text, datetime(2023, 5, 8, 13, 56))
    assert out == "Went to a support group yesterday (7 May 2023), and next month (June 2023) we go to Paris."
    assert annotate(text, None) == text


def test_no_phrase_no_change_and_no_overlap():
    assert resolve_relative("I love painting sunsets", MONDAY) == []
    found = resolve_relative("the day before yesterday", MONDAY)
    assert len(found) == 1 and found[0].day == date(2023, 5, 6)
    assert resolve_relative("two weeks ago", MONDAY)[0].phrase == "two weeks ago"


def test_session_stamps_parse():
    assert parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert parse_session_date("10:37 am on 27 June, 2023").date() == date(2023, 6, 27)
    assert parse_session_date("") is None and parse_session_date("not a date at all") is None
    assert fmt_day(date(2023, 7, 4)) == "4 July 2023"
