"""Dates in a user's message, for the rule router: what it reads, and what it could not read.

Read (each with since/after/from or before/until words, or two of them as a range):

* ``YYYY-MM-DD`` (ISO), the tools' own form;
* ``31/01/2024``, ``31-01-2024``, ``31.01.2024``: day and month in either order, but only when the
  order is unambiguous (one part above 12, or both equal); ``03/04/2024`` could be 3 April (India,
  UK) or March 4 (US), so it is reported as ambiguous, never guessed;
* ``31 Jan 2024``, ``31st January 2024``, ``Jan 31, 2024``, ``January 31st 2024``;
* ``March 2026`` (the month) and ``in 2026`` (the year).

Anything that looks like a date but is not one of these, or is not a calendar day (``2024-13-01``,
``31/02/2024``, a two-digit year), is a :class:`DateProblem`: the router says which date it could not
read and how to write it, instead of answering for the default period.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_right
from dataclasses import dataclass
from datetime import date

MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m} | \
         {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m} | {"sept": 9}
_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
#: Every form that is read; the first alternative that matches at a position wins.
_FORMS = re.compile(
    r"\b(?P<iso>(\d{4})-(\d{1,2})-(\d{1,2}))\b"
    rf"|\b(?P<num>(\d{{1,2}})([/.-])(\d{{1,2}})\7{_YEAR})\b"
    rf"|\b(?P<dmy>{_DAY}\s+{_MONTH},?\s+{_YEAR})\b"
    rf"|\b(?P<mdy>{_MONTH}\s+{_DAY},?\s+{_YEAR})\b"
    rf"|\b(?P<month>{_MONTH}\s+{_YEAR})\b(?!-)"
    r"|\bin (?P<year>(?:19|20)\d\d)\b(?!-)")
#: Date-shaped text that none of the forms above read (checked after them, on what is left).
_DATE_SHAPED = re.compile(r"\b\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4}\b|\b(?:19|20)\d\d(?:0[1-9]|1[0-2])\d\d\b")
_SINCE = re.compile(r"\b(since|after|from)\s*$")
_UNTIL = re.compile(r"\b(before|until|till|up to|through)\s*$")


@dataclass(frozen=True)
class DateProblem:
    text: str  # the date as the user wrote it
    kind: str  # "ambiguous" | "unreadable"


@dataclass(frozen=True)
class Dates:
    spans: tuple[tuple[int, date, date], ...]  # (position in the text, first day, last day), in order
    problems: tuple[DateProblem, ...]


def read_dates(low: str) -> Dates:
    """Every date in the lower-cased message: the ones read, and the ones that could not be."""
    spans: list[tuple[int, date, date]] = []
    problems: list[DateProblem] = []
    taken: list[tuple[int, int]] = []
    for m in _FORMS.finditer(low):
        taken.append(m.span())
        read = _read(m)
        if isinstance(read, DateProblem):
            problems.append(read)
        else:
            spans.append((m.start(), *read))
    starts = [a for a, _ in taken]  # in text order: a bisection finds the one read span that may cover a hit
    for m in _DATE_SHAPED.finditer(low):
        i = bisect_right(starts, m.start()) - 1
        if i < 0 or not taken[i][0] <= m.start() < taken[i][1]:
            problems.append(DateProblem(m.group(0), "unreadable"))
    return Dates(tuple(sorted(spans)), tuple(problems))


def date_range(low: str) -> dict[str, str]:
    """``from_date``/``to_date`` from the dates read, with since/before words (two dates: a range)."""
    spans = list(read_dates(low).spans)
    if not spans:
        return {}
    if len(spans) >= 2:
        return {"from_date": spans[0][1].isoformat(), "to_date": spans[1][2].isoformat()}
    at, start, end = spans[0]
    before = low[max(0, at - 64):at]  # the since/until word just before the date (a bounded look)
    if _SINCE.search(before):
        return {"from_date": start.isoformat()}
    if _UNTIL.search(before):
        return {"to_date": end.isoformat()}
    return {"from_date": start.isoformat(), "to_date": end.isoformat()}


def _read(m: re.Match[str]) -> tuple[date, date] | DateProblem:
    text = m.group(0)
    try:
        if m.group("iso"):
            return _day(int(m.group(2)), int(m.group(3)), int(m.group(4)))
        if m.group("num"):
            return _numeric(text, int(m.group(6)), int(m.group(8)), int(m.group(9)))
        if m.group("dmy"):
            return _day(int(m.group(13)), MONTHS[m.group(12)], int(m.group(11)))
        if m.group("mdy"):
            return _day(int(m.group(17)), MONTHS[m.group(15)], int(m.group(16)))
        if m.group("month"):
            year, month = int(m.group(20)), MONTHS[m.group(19)]
            return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
        year = int(m.group("year"))
        return date(year, 1, 1), date(year, 12, 31)
    except ValueError:
        return DateProblem(text, "unreadable")


def _day(year: int, month: int, day: int) -> tuple[date, date]:
    d = date(year, month, day)
    return d, d


def _numeric(text: str, a: int, b: int, year: int) -> tuple[date, date] | DateProblem:
    """``a/b/year``: day/month when a > 12, month/day when b > 12; both 12 or under and different is
    ambiguous."""
    if a > 12 >= b or a == b:
        return _day(year, b, a)
    if b > 12 >= a:
        return _day(year, a, b)
    return DateProblem(text, "ambiguous" if a <= 12 and b <= 12 else "unreadable")
