"""Line tests the chunker uses, written so they run in time linear in the text.

Any text file can carry long runs of blanks, tabs or punctuation, so nothing here may backtrack
over such a run more than once. Two techniques keep that promise:

* patterns use possessive quantifiers and atomic groups (``*+``, ``++``, ``(?>...)``, Python >= 3.11)
  wherever a run could otherwise be re-split between two quantifiers;
* tests of the form "something at the *end* of a line" (page footers, dot leaders, table-of-contents
  page numbers) are plain string scans from the right instead of ``re.search`` (which would retry the
  pattern at every start position of a long run);
* page furniture and headings are short by nature, so the per-line tests are only tried on lines up
  to ``FURNITURE_MAX_CHARS`` long (RFC lines are at most 72 characters).

``tests/understand/test_linear_time_text.py`` checks every document-level entry point on pathological inputs.
"""

from __future__ import annotations

import re

FURNITURE_MAX_CHARS = 200  # RFC running headers/footers and headings are < 80 chars; longer lines are prose

_BLANK = " \t"
_PAGE_NUMBER = "0123456789ivxlcIVXLC"
_DATE = (r"(?:\d{1,2}\s++)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*+\.?\s++\d{4}")

PAGE_TAG = re.compile(r"\[page[ \t]++[0-9ivxlc]++\]", re.I)
HEADER = re.compile(rf"\s*+RFC\s?\d++\s{{2,}}+(?>.*\S)\s{{2,}}+{_DATE}\s*+$")  # modern running header
HEADER_AFTER_BREAK = re.compile(  # older, looser running headers: only trusted right after \f
    rf"\s*+(?:RFC:?\s?\d++(?:\s*+$|\s{{2,}}+)|{_DATE}\s*+$)|.*\S\s{{2,}}+(?:RFC\s?\d++|{_DATE})\s*+$")
RFC_ID = re.compile(r"^[ \t]*+(?:Request[ \t]++for[ \t]++Comments:?[ \t]*+(\d++)"
                    r"|RFC:?[ \t]*+(\d++)[ \t]*+(?:\r?$|(?<=[ \t][ \t])\S))", re.I | re.M)
NUMBERED = re.compile(r"(\d{1,2}(?:\.\d{1,3})*+\.?|[A-Z](?:\.\d{1,3})*+\.)\s++"
                      r"([A-Za-z\"'](?:(?!   )[^<>|]){0,78}+)(?<!:)$")
APPENDIX = re.compile(r"appendix\s++([A-Z](?:\.\d{1,3})*+)\.?\s*+[:.\-]?\s*+(?<=\s)(\S.{0,78}+)$", re.I)
UNDERLINE = re.compile(r"\s*+(?:-{3,}+|={3,}+)\s*+$")
SENT = re.compile(r"[.!?][\"')\]]*+(\s++)(?=\S)")
WORD = re.compile(r"\S+")
_MD_HEAD = re.compile(r" {0,3}(#{1,6})[ \t]++(.+)$")
MD_ANY = re.compile(r"^ {0,3}#{1,6}[ \t]++\S", re.M)
FENCE = re.compile(r" {0,3}(```|~~~)")
MD_LIST = re.compile(r"\s*+(?:[-*+]|\d++[.)])\s|\s*+\|")


def md_heading(line: str) -> tuple[int, str] | None:
    """(level, title) of an ATX heading line (right-stripped), trailing blanks and #s removed."""
    m = _MD_HEAD.match(line)
    if m is None:
        return None
    rest = m.group(2)
    return len(m.group(1)), rest.rstrip(" \t#") or rest[:1]


def is_footer(line: str) -> bool:
    """``[Page N]`` alone, or separated by 2+ blanks from text before and/or after it."""
    if len(line) > FURNITURE_MAX_CHARS or "]" not in line:
        return False
    return any(_footer_around(line, m.start(), m.end()) for m in PAGE_TAG.finditer(line))


def _footer_around(line: str, start: int, end: int) -> bool:
    before, after = line[:start].lstrip(" \t\f"), line[end:].rstrip(" \t\r")
    return ((not before or before[-2:].strip(_BLANK) == "" and len(before) > 2)
            and (not after or after[:2].strip(_BLANK) == "" and len(after) > 2))


def count_footers(text: str, enough: int) -> int:
    """Footer lines in ``text``, counting up to ``enough``; one pass over the page tags."""
    found, stop = 0, 0
    for m in PAGE_TAG.finditer(text):
        if m.start() < stop:
            continue  # one verdict per line: is_footer looks at every tag of the line
        start = text.rfind("\n", stop, m.start()) + 1 or stop
        stop = text.find("\n", m.end())
        stop = len(text) if stop < 0 else stop
        found += is_footer(text[start:stop].rstrip("\r"))
        if found >= enough:
            break
    return found


def is_running_header(line: str) -> bool:
    return len(line) <= FURNITURE_MAX_CHARS and "RFC" in line and HEADER.match(line) is not None


def is_header_after_break(line: str) -> bool:
    return len(line) <= FURNITURE_MAX_CHARS and HEADER_AFTER_BREAK.match(line) is not None


def _dot_leader_before(s: str, end: int) -> bool:
    """Three or more dots (each optionally followed by one blank) end at ``end`` (after optional blanks)."""
    i = end
    while i > 0 and s[i - 1].isspace():
        i -= 1
    dots = 0
    while i > 0:
        if s[i - 1] == ".":
            dots, i = dots + 1, i - 1
        elif s[i - 1].isspace() and i > 1 and s[i - 2] == ".":
            i -= 1
        else:
            break
    return dots >= 3


def _page_number_start(s: str) -> int:
    """Start of the trailing page number (``[0-9ivxlc]+$``), or -1 when the line has none."""
    i = len(s)
    while i > 0 and s[i - 1] in "0123456789ivxlc":
        i -= 1
    return i if i < len(s) else -1


def ends_with_leader(s: str) -> bool:
    """A table-of-contents dot leader and page number: ``Introduction ........ 4``."""
    i = _page_number_start(s)
    return i >= 0 and _dot_leader_before(s, i)


def toc_line(s: str) -> bool:
    """A table-of-contents entry: a page number after a dot leader or after 2+ blanks."""
    i = _page_number_start(s)
    if i < 0:
        return False
    j = i
    while j > 0 and s[j - 1].isspace():
        j -= 1
    return _dot_leader_before(s, i) or (i - j >= 2 and j > 0)
