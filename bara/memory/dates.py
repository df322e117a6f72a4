"""Relative dates resolved against the date a thing was said, so "when" questions find a date.

"I went to a support group yesterday", said on 8 May 2023, is stored as
"... yesterday (7 May 2023) ...": the resolution is written next to the phrase at
write time, where the session date is known, and searched like any other word.

Pure and deterministic: no network, no clock (the anchor is always given).
Calendar arithmetic is :mod:`dateutil.relativedelta`; "last <weekday>" is the
latest such day strictly before the anchor, "next <weekday>" the first strictly
after it; "last week" names the Monday of the previous ISO week.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from dateutil import parser as dateparser
from dateutil.relativedelta import relativedelta

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "a couple of": 2,
            "few": 3, "a few": 3}
_UNIT = r"(day|week|month|year)s?"
_COUNT = r"(\d{1,2}|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("day_before_yesterday", re.compile(r"\bthe day before yesterday\b", re.I)),
    ("day_after_tomorrow", re.compile(r"\bthe day after tomorrow\b", re.I)),
    ("ago", re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)),
    ("in_n", re.compile(rf"\bin\s+{_COUNT}\s+{_UNIT}\b(?!\s+ago)", re.I)),
    ("weekday", re.compile(r"\b(last|this past|past|next|this coming|coming)\s+(" + "|".join(WEEKDAYS) + r")\b",
                           re.I)),
    ("weekend", re.compile(r"\b(last|this past|past|next|this|this coming|coming)\s+weekend\b", re.I)),
    ("period", re.compile(r"\b(last|next|this)\s+(week|month|year|summer|winter|spring|fall|autumn)\b", re.I)),
    ("yesterday", re.compile(r"\byesterday\b", re.I)),
    ("tomorrow", re.compile(r"\btomorrow\b", re.I)),
    ("today", re.compile(r"\b(today|tonight|this morning|this afternoon|this evening)\b", re.I)),
)
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


@dataclass(frozen=True)
class Resolved:
    """One relative phrase found in a text and what it means on the anchor date."""

    start: int
    end: int
    phrase: str
    value: str  # "7 May 2023", "the week of 1 May 2023", "June 2023", "2022"
    day: date | None  # the day meant, when the phrase names one day (else None)


def parse_session_date(text: str) -> datetime | None:
    """A LoCoMo-style session stamp ("1:56 pm on 8 May, 2023") or any date dateutil reads; None if unreadable."""
    if not text or not text.strip():
        return None
    try:
        return dateparser.parse(text.replace(" on ", " "), fuzzy=True, default=datetime(2000, 1, 1))
    except (ValueError, OverflowError):
        return None


def fmt_day(d: date) -> str:
    """``7 May 2023`` (no leading zero, full month name)."""
    return f"{d.day} {d.strftime('%B')} {d.year}"


def _count(word: str) -> int:
    word = word.lower().strip()
    return int(word) if word.isdigit() else _NUMBERS.get(word, 1)


def _shift(anchor: date, n: int, unit: str) -> date:
    unit = unit.lower().rstrip("s")
    return anchor + (relativedelta(days=n) if unit == "day" else relativedelta(weeks=n) if unit == "week"
                     else relativedelta(months=n) if unit == "month" else relativedelta(years=n))


def _span_value(d: date, unit: str, fuzzy: bool) -> tuple[str, date | None]:
    """How to name a shifted date: a day for days/weeks, a month for months, a year for years."""
    unit = unit.lower().rstrip("s")
    if unit == "year":
        return str(d.year), None
    if unit == "month":
        return f"{d.strftime('%B')} {d.year}", None
    return (f"around {fmt_day(d)}", d) if fuzzy else (fmt_day(d), d)


def _weekday(anchor: date, direction: str, name: str) -> date:
    target = WEEKDAYS.index(name.lower())
    if direction.lower() in ("next", "this coming", "coming"):
        return anchor + timedelta(days=(target - anchor.weekday() - 1) % 7 + 1)
    return anchor - timedelta(days=(anchor.weekday() - target - 1) % 7 + 1)


def _weekend(anchor: date, direction: str) -> tuple[str, date]:
    direction = direction.lower()
    if direction in ("last", "this past", "past"):
        sat = _weekday(anchor, "last", "saturday")
    elif direction == "this" and anchor.weekday() >= 5:
        sat = anchor - timedelta(days=anchor.weekday() - 5)
    else:
        sat = _weekday(anchor, "next", "saturday")
    return f"the weekend of {fmt_day(sat)}", sat


def _period(anchor: date, direction: str, unit: str) -> tuple[str, date | None]:
    step = {"last": -1, "next": 1, "this": 0}[direction.lower()]
    unit = unit.lower()
    if unit == "week":
        monday = anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=step)
        return f"the week of {fmt_day(monday)}", None
    if unit == "month":
        d = anchor + relativedelta(months=step)
        return f"{d.strftime('%B')} {d.year}", None
    if unit == "year":
        return str(anchor.year + step), None
    month = _SEASONS[unit]  # the season's first month
    if step == -1:  # the latest such season already over: "last summer" said in May 2023 is 2022
        year = anchor.year if anchor.month > month + 2 else anchor.year - 1
    elif step == 1:
        year = anchor.year if anchor.month < month else anchor.year + 1
    else:
        year = anchor.year - 1 if unit == "winter" and anchor.month <= 2 else anchor.year
    return f"{unit} {year}", None


def _resolve(kind: str, m: re.Match, anchor: date) -> tuple[str, date | None]:
    if kind == "yesterday":
        return fmt_day(anchor - timedelta(days=1)), anchor - timedelta(days=1)
    if kind == "tomorrow":
        return fmt_day(anchor + timedelta(days=1)), anchor + timedelta(days=1)
    if kind == "today":
        return fmt_day(anchor), anchor
    if kind == "day_before_yesterday":
        return fmt_day(anchor - timedelta(days=2)), anchor - timedelta(days=2)
    if kind == "day_after_tomorrow":
        return fmt_day(anchor + timedelta(days=2)), anchor + timedelta(days=2)
    if kind in ("ago", "in_n"):
        n = _count(m.group(1)) * (-1 if kind == "ago" else 1)
        fuzzy = m.group(1).lower().strip() in ("few", "a few", "couple of", "a couple of")
        return _span_value(_shift(anchor, n, m.group(2)), m.group(2), fuzzy)
    if kind == "weekday":
        d = _weekday(anchor, m.group(1), m.group(2))
        return fmt_day(d), d
    if kind == "weekend":
        return _weekend(anchor, m.group(1))
    return _period(anchor, m.group(1), m.group(2))


def resolve_relative(text: str, anchor: date | datetime) -> list[Resolved]:
    """Every relative date phrase in ``text`` resolved against ``anchor``, in text order, never overlapping."""
    day = anchor.date() if isinstance(anchor, datetime) else anchor
    found: list[Resolved] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text or ""):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            value, d = _resolve(kind, m, day)
            found.append(Resolved(m.start(), m.end(), m.group(0), value, d))
            taken.append((m.start(), m.end()))
    return sorted(found, key=lambda r: r.start)


def annotate(text: str, anchor: date | datetime | None) -> str:
    """``text`` with each relative phrase followed by its resolution: "yesterday (7 May 2023)"."""
    if anchor is None:
        return text
    out, last = [], 0
    for r in resolve_relative(text, anchor):
        out.append(text[last:r.end])
        out.append(f" ({r.value})")
        last = r.end
    out.append(text[last:])
    return "".join(out)
