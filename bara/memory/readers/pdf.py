"""PDF: the text layer by PDFium (pypdfium2), page by page, headings from the outline.

Text is taken inside each page's crop box, in the order the page draws it (authoring tools write
columns one after the other, so a two-column page reads column by column). PDFium marks a word it
rejoined across a line-end hyphen with U+0002; that mark is dropped. Running headers and footers
(the same first or last line on many pages, digits aside) and bare page numbers are page furniture.
An outline entry becomes a heading only where its title is found on its page (outlines can be
wrong); a PDF without such an outline gets its headings from the size of its type (pdf_fonts). Password-protected files are ``encrypted``; files whose pages carry no text are
``no text layer`` (scanned or images only): neither is indexed.
"""

from __future__ import annotations

import re
from collections import Counter

import pypdfium2 as pdfium

from bara.memory.readers.base import Unreadable
from bara.memory.readers.pdf_fonts import line_sizes, size_headings
from bara.retrieval.structure import Builder, Structured

_JUNK = str.maketrans({"\x02": "", "\ufffe": "", "\x00": "", "\f": "\n", "\r": ""})
_PAGE_NO = re.compile(r"(?:page\s+)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:/|of)\s*\d{1,4})?", re.I)
_SECTION_NO = re.compile(r"^(?:\d{1,3}|[A-Z])(?:\.\d{1,3})*\.?\s+")
_EDGE_LINES = 2  # running headers/footers sit in the first or last two lines of a page


class PdfReader:
    name = "pdf"
    suffixes = frozenset({".pdf"})
    version = "pdf-2"

    def read(self, data: bytes) -> Structured:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if "password" in str(exc).lower():
                raise Unreadable("encrypted", "the PDF needs a password to open") from None
            raise Unreadable("unreadable", f"not a PDF that can be opened ({exc})") from None
        try:
            read = [_page_text(pdf, i) for i in range(len(pdf))]
            outline, title = _outline(pdf), _meta_title(pdf)
        finally:
            pdf.close()
        pages, sizes = [lines for lines, _ in read], [size for _, size in read]
        if not any(pages):
            raise Unreadable("no text layer", f"{len(pages)} page(s) without text (scanned or images only)")
        pages = _drop_furniture(pages)
        doc = _build(pages, outline, title)
        if outline and any(b.kind == "heading" for b in doc.blocks):
            return doc
        doc = _build(pages, size_headings(pages, sizes), title)  # no outline, or none of it on its pages
        if title:
            return doc
        first = next((b for b in doc.blocks if b.kind == "heading" and b.level == 1 and b.page == 1), None)
        return Structured(doc.text, doc.text[first.start:first.end], doc.blocks, doc.paged) if first else doc


def _page_text(pdf: pdfium.PdfDocument, i: int) -> tuple[list[str], dict[str, float]]:
    """The page's lines inside its crop box, and the type size of each line."""
    page = pdf[i]
    try:
        tp = page.get_textpage()
        try:
            text, sizes = tp.get_text_bounded(), line_sizes(tp)
        finally:
            tp.close()
    finally:
        page.close()
    return [ln.strip() for ln in text.translate(_JUNK).split("\n") if ln.strip()], sizes


def _outline(pdf: pdfium.PdfDocument) -> dict[int, list[tuple[int, str]]]:
    """Outline entries by 0-based page: (level, title)."""
    out: dict[int, list[tuple[int, str]]] = {}
    try:
        for item in pdf.get_toc(max_depth=6):
            dest, title = item.get_dest(), " ".join((item.get_title() or "").split())
            index = dest.get_index() if dest is not None else None
            if title and index is not None:
                out.setdefault(index, []).append((item.level + 1, title))
    except pdfium.PdfiumError:
        return {}
    return out


def _meta_title(pdf: pdfium.PdfDocument) -> str:
    try:
        raw = pdf.get_metadata_dict(skip_empty=True).get("Title", "")
    except pdfium.PdfiumError:
        return ""
    return " ".join(raw.replace("\x00", " ").split())


def _key(line: str) -> str:
    return re.sub(r"\d+", "#", line.lower())


def _drop_furniture(pages: list[list[str]]) -> list[list[str]]:
    """Pages without running headers/footers (a first or last line repeated, digits aside, on a third
    of the pages, or on 3 when it holds a page number) and without a bare page number there."""
    edges = Counter(k for lines in pages for k in {_key(ln) for ln in lines[:_EDGE_LINES] + lines[-_EDGE_LINES:]})
    least = max(3, len(pages) // 3)  # or 3 pages when the line holds a number (a chapter's running head)
    furniture = {k for k, n in edges.items() if n >= least or n >= 3 and "#" in k}
    out = []
    for lines in pages:
        keep = list(lines)
        for _ in range(_EDGE_LINES):
            if keep and (_key(keep[0]) in furniture or _PAGE_NO.fullmatch(keep[0])):
                keep.pop(0)
            if keep and (_key(keep[-1]) in furniture or _PAGE_NO.fullmatch(keep[-1])):
                keep.pop()
        out.append(keep)
    return out


def _build(pages: list[list[str]], outline: dict[int, list[tuple[int, str]]], title: str) -> Structured:
    b = Builder()
    for i, lines in enumerate(pages):
        b.page = i + 1
        at = 0
        for level, heading in outline.get(i, []):
            found = _find(lines, heading, at)
            if found is None:
                continue
            start, end = found
            b.para("\n".join(lines[at:start]))
            b.heading(" ".join(lines[start:end]), level)  # as printed: "1 Foo" for the entry "Foo"
            at = end
        b.para("\n".join(lines[at:]))
    return b.build(title, paged=True)


def _squash(s: str) -> str:
    return "".join(s.split()).casefold()


def _find(lines: list[str], heading: str, at: int) -> tuple[int, int] | None:
    """Lines [start, end) from ``at`` on that spell ``heading`` (spaces aside, a section number before
    it allowed), on up to three lines."""
    want = _squash(heading)
    for start in range(at, len(lines)):
        got = ""
        for end in range(start, min(start + 3, len(lines))):
            got += _squash(_SECTION_NO.sub("", lines[end], count=1) if end == start else lines[end])
            if got == want or _squash(lines[start]) == want:
                return start, end + 1
            if not want.startswith(got):
                break
    return None
