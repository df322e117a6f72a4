"""Headings of a PDF without a usable outline, from the size of its type.

A line set clearly larger than the body text (``HEADING_SCALE`` times the size most characters
have), short, with a letter and no sentence punctuation at its end, is a heading; the larger its
type, the higher its level (three levels at most). A line that repeats on three pages or more is
page furniture, not a heading. Sizes come from PDFium's text page, one lookup per line.
"""

from __future__ import annotations

from collections import Counter

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

HEADING_SCALE = 1.25  # LaTeX \section is 1.44x the body, \subsection 1.2x of 12 pt; a 10 -> 12 pt author line is not
_MAX_CHARS, _MAX_WORDS, _MAX_LEVELS = 80, 12, 3
_JUNK = str.maketrans({"\x02": "", "\ufffe": "", "\x00": "", "\r": ""})


def line_sizes(tp: pdfium.PdfTextPage) -> dict[str, float]:
    """Each line of the page's text (as the bounded text spells it) and its first character's size."""
    text, out, pos = tp.get_text_range(), {}, 0
    count = tp.count_chars()
    for raw in text.split("\n"):
        lead = len(raw) - len(raw.lstrip())
        line = raw.translate(_JUNK).strip()
        if line and pos + lead < count:
            out.setdefault(line, round(pdfium_c.FPDFText_GetFontSize(tp.raw, pos + lead), 1))
        pos += len(raw) + 1
    return out


def size_headings(pages: list[list[str]], sizes: list[dict[str, float]]) -> dict[int, list[tuple[int, str]]]:
    """Headings by 0-based page, (level, line), in the shape of the outline's entries."""
    weight: Counter[float] = Counter()
    for lines, size in zip(pages, sizes, strict=True):
        for ln in lines:
            if ln in size:
                weight[size[ln]] += len(ln)
    if not weight:
        return {}
    body = weight.most_common(1)[0][0]
    seen = Counter(ln for lines in pages for ln in set(lines))
    found = {i: [(size[ln], ln) for ln in lines if _heading_like(ln, size.get(ln, 0.0), body) and seen[ln] < 3]
             for i, (lines, size) in enumerate(zip(pages, sizes, strict=True))}
    ranks = {s: r for r, s in enumerate(sorted({s for heads in found.values() for s, _ in heads}, reverse=True))}
    return {i: [(min(ranks[s] + 1, _MAX_LEVELS), ln) for s, ln in heads] for i, heads in found.items() if heads}


def _heading_like(line: str, size: float, body: float) -> bool:
    return (size >= body * HEADING_SCALE and len(line) <= _MAX_CHARS and len(line.split()) <= _MAX_WORDS
            and any(c.isalpha() for c in line) and line[-1] not in ".,;:")
