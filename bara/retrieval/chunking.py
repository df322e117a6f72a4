"""Split documents into retrievable chunks that respect their structure.

Retrieval quality depends on chunks being coherent (whole sentences, one section
each) and traceable (character offsets into the original). RFCs are the demo
knowledge base, so their page furniture (form feeds, running headers, ``[Page N]``
footers) is removed and paragraphs split by a page break are rejoined before
packing; Markdown and plain text share the same packing with simpler structure.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import groupby

from bara.retrieval.chunk_patterns import (APPENDIX, FENCE, MD_ANY, MD_LIST, NUMBERED, RFC_ID, SENT, UNDERLINE,
                                           WORD, count_footers, ends_with_leader, is_footer, is_header_after_break,
                                           is_running_header, md_heading, toc_line)
from bara.settings import Settings
from bara.types import Chunk

_EOL = re.compile(r"(\r\n|\r|\n)")
_ABBREV = frozenset("e.g. i.e. etc. vs. cf. al. fig. no. sec. mr. ms. dr. st. approx. resp.".split())
_FRONT = frozenset(["abstract", "status of this memo", "copyright notice", "table of contents", "contents",
                    "acknowledgements", "acknowledgments", "authors' addresses", "author's address",
                    "full copyright statement", "intellectual property", "index", "preface", "references"])


@dataclass(slots=True)
class _Line:
    """One source line: its non-blank span in the original and its layout text."""
    start: int  # offset of the first non-blank character in the original
    end: int  # offset after the last non-blank character
    text: str  # tabs expanded, form feeds dropped, right-stripped ('' when blank)
    indent: int = 0
    ff: bool = False  # the line carried a form feed (page break)
    brk: bool = False  # page furniture was removed just before this line


@dataclass(slots=True)
class _Unit:
    """The packing atom: a sentence, a piece of an over-long sentence, or figure lines."""
    text: str
    start: int
    end: int
    whole: bool  # a complete sentence: may be repeated as overlap
    prose: bool
    para_end: bool = False


_Block = tuple[str, str, list[_Line], bool]  # (section, title, lines, is_figure)


def looks_like_rfc(text: str) -> bool:
    """True for IETF RFC plain-text layout: an RFC number header or repeated page footers."""
    return bool(RFC_ID.search(text[:5000])) or count_footers(text, 2) == 2


def chunk_document(text: str, source: str, settings: Settings) -> tuple[str, list[Chunk]]:
    """Returns (document title, chunks). Dispatches: RFC layout -> RFC chunker;
    Markdown (#-headings) -> markdown chunker; else plain-text chunker."""
    parse = _rfc_blocks if looks_like_rfc(text) else _markdown_blocks if MD_ANY.search(text) else _plain_blocks
    title, blocks = parse(text)
    return title, _chunks(text, source, blocks, settings)


def _lines(text: str) -> list[_Line]:
    """Every line with its offsets; only \\r\\n, \\r and \\n end lines (not \\f or \\x1c)."""
    pieces = _EOL.split(text)  # line, terminator, line, ...
    out, pos = [], 0
    for i in range(0, len(pieces), 2):
        raw, stripped = pieces[i], pieces[i].strip()
        ff = "\f" in raw
        if not stripped:
            out.append(_Line(pos, pos, "", 0, ff))
        else:
            lead = len(raw) - len(raw.lstrip())
            lay = (raw.lstrip("\f").replace("\f", " ").expandtabs() if ff or "\t" in raw else raw).rstrip()
            out.append(_Line(pos + lead, pos + lead + len(stripped), lay, len(lay) - len(lay.lstrip()), ff))
        pos += len(raw) + (len(pieces[i + 1]) if i + 1 < len(pieces) else 0)
    return out


def _paragraphs(lines: list[_Line], joins=None) -> list[list[_Line]]:
    """Group lines into blank-separated blocks; ``joins`` may continue a block over a page break."""
    blocks: list[list[_Line]] = [[]]
    gap = False
    for ln in lines:
        if ln.text:
            if blocks[-1] and (gap or ln.brk) and not (ln.brk and joins and joins(blocks[-1][-1], ln)):
                blocks.append([])
            blocks[-1].append(ln)
        gap = not ln.text
    return [b for b in blocks if b]


def _is_figure(lines: list[_Line]) -> bool:
    """Figures, tables, ABNF and short-line lists: most lines are short or drawn."""
    odd = 0
    for ln in lines[:-1]:
        s = ln.text[ln.indent:]
        odd += len(s) < 40 or "   " in s or "|" in s or "+-" in s or "-+" in s
    return len(lines) > 1 and odd * 2 >= len(lines) - 1


def _rfc_blocks(text: str) -> tuple[str, list[_Block]]:
    lines = _drop_furniture(_lines(text))
    blocks = _paragraphs(lines, _continues)
    title, first = _rfc_title(blocks)
    m = RFC_ID.search(text[:5000])
    if m:
        title = f"RFC {m.group(1) or m.group(2)}" + (f": {title}" if title else "")
    indented = sum(1 for ln in lines if ln.indent) * 2 > sum(1 for ln in lines if ln.text)
    return title, _rfc_sections(blocks[first:], indented)


def _drop_furniture(lines: list[_Line]) -> list[_Line]:
    """Remove footers and running headers; flag the next text line as after a page break."""
    out: list[_Line] = []
    i, brk = 0, False
    while i < len(lines):
        ln = lines[i]
        footer = ln.text and (is_footer(ln.text) or is_running_header(ln.text))
        j = i + 1 if footer else _header_end(lines, i) if ln.ff else i
        brk = brk or j != i or ln.ff
        if j == i:
            if ln.text:
                ln.brk, brk = brk, False
            out.append(ln)
        i = max(j, i + 1)
    return out


def _header_end(lines: list[_Line], i: int) -> int:
    """Index after the running header that follows the page break at ``i`` (if any)."""
    j = i if lines[i].text else i + 1
    while j < len(lines) and not lines[j].text:
        j += 1
    if j < len(lines) and is_header_after_break(lines[j].text):
        k = j
        while k < len(lines) and lines[k].text and k - j < 3:
            k += 1
        return k if k >= len(lines) or not lines[k].text else j + 1
    return i if lines[i].text else i + 1


def _continues(prev: _Line, nxt: _Line) -> bool:
    """A paragraph cut by a page break resumes at the same indent, with no sentence end
    before and no heading after (a figure followed by prose changes indent)."""
    s = nxt.text.strip()
    return nxt.indent == prev.indent and (s[0].islower() or prev.text[-1] not in ".:!?"
                                          and not NUMBERED.match(s) and s.lower() not in _FRONT)


def _rfc_title(blocks: list[list[_Line]]) -> tuple[str, int]:
    """The block after the first-page 'Request for Comments' block is the title."""
    for i, blk in enumerate(blocks[:6]):
        if any(RFC_ID.match(ln.text) or "Request for Comments" in ln.text for ln in blk):
            nxt = blocks[i + 1] if i + 1 < len(blocks) else []
            if 0 < len(nxt) <= 8:
                words = [ln.text.strip() for ln in nxt if not UNDERLINE.match(ln.text)]
                return " ".join(" ".join(words).split()), i + 2
            return "", i + 1
    return "", 0


def _rfc_sections(blocks: list[list[_Line]], indented: bool) -> list[_Block]:
    """Tag blocks with the current section; headings and the table of contents are not content."""
    out: list[_Block] = []
    state, section, title, toc = (), "", "", False
    for i, blk in enumerate(blocks):
        if toc and any(toc_line(ln.text) for ln in blk):
            continue
        head = _heading(blk, blocks[i + 1] if i + 1 < len(blocks) else None, state, indented)
        toc = head is not None and head[1].lower() in ("table of contents", "contents")
        if head is not None:
            title, state, section = head[1], (head[0] or state), ".".join(head[0])
            continue
        kept = [ln for ln in blk if not (("..." in ln.text or ". ." in ln.text) and ends_with_leader(ln.text))]
        if kept:
            out.append((section, title, kept, _is_figure(kept)))
    return out


def _heading(blk, nxt, state, indented) -> tuple[tuple[str, ...], str] | None:
    """(number parts, title) when ``blk`` is a section heading, else None."""
    first = blk[0].text.strip()
    if len(blk) == 2 and UNDERLINE.match(blk[1].text) and len(first) <= 70:
        return (), first.rstrip(":")
    if len(blk) > 2 or len(first) > 80:
        return None
    m = APPENDIX.match(first) or NUMBERED.match(first)
    num = tuple(m.group(1).upper().rstrip(".").split(".")) if m else ()
    if m and _follows(state, num) and _placed(blk, nxt):
        return num, " ".join([m.group(2).strip()] + [ln.text.strip() for ln in blk[1:]])
    return ((), first.rstrip(":")) if not m and len(blk) == 1 and _unnumbered(blk[0], indented) else None


def _follows(prev: tuple[str, ...], new: tuple[str, ...]) -> bool:
    """Can ``new`` be the next section number after ``prev``? Stops numbered lists and
    figure lines from posing as headings; a gap of one missed heading is tolerated."""
    m = len(new)
    if m > len(prev) + 1 or new[:m - 1] != prev[:m - 1]:
        return False
    if m == len(prev) + 1:
        return new[-1] in ("1", "2") or (m == 1 and new[-1] in ("A", "B"))
    old, cur = prev[m - 1], new[-1]
    if old.isdigit() != cur.isdigit():
        return m == 1 and cur in ("A", "B", "C")
    step = int(cur) - int(old) if cur.isdigit() else ord(cur) - ord(old)
    return 0 < step <= 2


def _placed(blk: list[_Line], nxt: list[_Line] | None) -> bool:
    """Headings sit at the margin, are centred, or are outdented from their body;
    numbered list items sit at the same indent as their neighbours."""
    indent = blk[0].indent
    if len(blk) == 2 and blk[1].indent <= indent:
        return False
    return indent == 0 or indent >= 12 or nxt is None or nxt[0].indent > indent


def _unnumbered(line: _Line, indented: bool) -> bool:
    """Front/back matter names anywhere; in indented RFCs any short margin line."""
    s = line.text.strip()
    return s.lower().rstrip(":") in _FRONT or (indented and line.indent == 0 and len(s) <= 60
                                               and s[0].isupper() and s[-1] not in ".,;" and "  " not in s)


def _markdown_blocks(text: str) -> tuple[str, list[_Block]]:
    """Blocks under their heading path; fenced code, lists and tables keep their lines."""
    blocks: list[_Block] = []
    path, heads, cur, fence = [], [], [], None
    for ln in _lines(text) + [_Line(len(text), len(text), "")]:  # the blank sentinel flushes
        fm, hm = FENCE.match(ln.text), md_heading(ln.text)
        if fence and not ln.text.strip().startswith(fence) or not (fence or fm or hm or not ln.text):
            cur.append(ln)
            continue
        _flush_md(blocks, path, cur, bool(fence))
        cur, fence = [], (None if fence else fm.group(1) if fm else None)
        if hm and not fm:
            path = path[:hm[0] - 1] + [hm[1]]
            heads.append(hm)
    h1 = [t for level, t in heads if level == 1]
    return (h1 or [t for _, t in heads] or [""])[0], blocks


def _flush_md(blocks: list[_Block], path: list[str], lines: list[_Line], code: bool) -> None:
    keep = [i for i, ln in enumerate(lines) if ln.text]
    if keep:
        lines = lines[keep[0]:keep[-1] + 1]
        figure = code or any(MD_LIST.match(ln.text) for ln in lines) or _is_figure(lines)
        blocks.append((" > ".join(path), path[-1] if path else "", lines, figure))


def _plain_blocks(text: str) -> tuple[str, list[_Block]]:
    """Paragraphs without sections; the first line doubles as the title when short."""
    blocks = [("", "", blk, _is_figure(blk)) for blk in _paragraphs(_lines(text))]
    first = blocks[0][2][0].text.strip() if blocks else ""
    return (first if len(first) <= 100 else ""), blocks


def _prose_units(text: str, lines: list[_Line], size: int) -> list[_Unit]:
    """Reflow hard-wrapped lines, split sentences, map each back to the original. RFCs wrap
    only at spaces or after hyphens ("application-" / "level"): such lines join without a space."""
    parts = [text[ln.start:ln.end] for ln in lines]
    seps = ["" if a[-1] == "-" and a[-2:-1].isalpha() and b[0].islower() else " "
            for a, b in zip(parts, parts[1:], strict=False)] + [""]
    starts, pos = [], 0
    for p, sep in zip(parts, seps, strict=False):
        starts.append(pos)
        pos += len(p) + len(sep)
    flat = "".join(p + sep for p, sep in zip(parts, seps, strict=False))

    def orig(i: int) -> int:
        k = bisect_right(starts, i) - 1
        return lines[k].start + i - starts[k]

    units = [_Unit(" ".join(flat[c:d].split()), orig(c), orig(d - 1) + 1, whole, True)
             for a, b in _sentences(flat) for c, d, whole in _fit(flat, a, b, size)]
    if units:
        units[-1].para_end = True
    return units


def _sentences(flat: str) -> list[tuple[int, int]]:
    cuts = [m for m in SENT.finditer(flat) if _is_boundary(flat, m)]
    spans = zip([0] + [m.end() for m in cuts], [m.start(1) for m in cuts] + [len(flat.rstrip())], strict=False)
    return [(a, b) for a, b in spans if b > a]


def _is_boundary(flat: str, m: re.Match) -> bool:
    """RFCs put two spaces after a sentence; otherwise require a capital and no abbreviation."""
    nxt, word = flat[m.end()], flat[max(0, m.start() - 12):m.start() + 1].split()[-1].lower()
    if len(m.group(1)) > 1:
        return True
    return ((nxt.isupper() or nxt.isdigit() or nxt in "\"'([") and word not in _ABBREV
            and not (len(word) == 2 and word[0].isalpha()))


def _fit(flat: str, a: int, b: int, size: int) -> list[tuple[int, int, bool]]:
    """A sentence that fits stays whole; a longer one is cut at word boundaries
    (a single word longer than ``size`` is hard-cut, the only way to honour the limit)."""
    if b - a <= size or len(" ".join(flat[a:b].split())) <= size:
        return [(a, b, True)]
    out: list[tuple[int, int, bool]] = []
    c, d, used = -1, -1, 0
    for m in WORD.finditer(flat, a, b):
        for s in range(m.start(), m.end(), size):
            e = min(s + size, m.end())
            if c >= 0 and used + 1 + e - s > size:
                out.append((c, d, False))
                c = -1
            c, used, d = (s, e - s, e) if c < 0 else (c, used + 1 + e - s, e)
    return out + [(c, d, False)]


def _figure_units(text: str, lines: list[_Line], size: int) -> list[_Unit]:
    """Figure lines stay lines (dedented, newline-joined), grouped up to ``size``."""
    pad = min(ln.indent for ln in lines if ln.text)
    units: list[_Unit] = []
    group: list[_Line] = []
    used = 0
    for ln in [*lines, None]:
        width = max(len(ln.text) - pad, 0) if ln else 0
        if group and (ln is None or width > size or used + 1 + width > size):
            body = "\n".join(g.text[pad:] for g in group)
            units.append(_Unit(body, group[0].start, group[-1].end, True, False))
            group = []
        if ln and width > size:
            units += _prose_units(text, [ln], size)
        elif ln:
            used = used + 1 + width if group else width
            group.append(ln)
    units[-1].para_end = True
    return units


def _chunks(text: str, source: str, blocks: list[_Block], settings: Settings) -> list[Chunk]:
    """Pack each section separately, so no chunk crosses a section boundary."""
    size = settings.chunk_size_chars
    out: list[Chunk] = []
    for (section, title), group in groupby(blocks, key=lambda b: (b[0], b[1])):
        units = [u for _, _, lines, fig in group
                 for u in (_figure_units if fig else _prose_units)(text, lines, size)]
        for packed in _pack(units, size, settings.chunk_overlap_chars):
            body = _render(packed)
            if len(body.strip()) >= settings.min_chunk_chars:
                out.append(Chunk(text=body, source=source, ordinal=len(out), start=packed[0].start,
                                 end=packed[-1].end, section=section, title=title))
    return out


def _render(units: list[_Unit]) -> str:
    """Sentences of a paragraph joined by a space, figure lines by a newline, paragraphs by a blank line."""
    seps = ["\n\n" if u.para_end else " " if u.prose else "\n" for u in units[:-1]]
    return "".join(u.text + sep for u, sep in zip(units, seps, strict=False)) + units[-1].text if units else ""


def _pack(units: list[_Unit], size: int, overlap: int) -> list[list[_Unit]]:
    """Greedy packing of whole units; each new chunk repeats trailing whole sentences."""
    packed, cur = [], []
    for u in units:
        if cur and len(_render(cur + [u])) > size:
            packed.append(cur)
            cur = _overlap(cur, overlap)
            while cur and len(_render(cur + [u])) > size:
                cur = cur[1:]
        cur = cur + [u]
    return packed + [cur] if cur else packed


def _overlap(prev: list[_Unit], budget: int) -> list[_Unit]:
    """Up to ``budget`` chars of whole trailing sentences, so boundary facts stay findable."""
    tail: list[_Unit] = []
    for u in reversed(prev):
        if not (u.prose and u.whole) or len(_render([u] + tail)) > budget:
            break
        tail.insert(0, u)
    return tail
