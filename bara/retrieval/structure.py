"""Documents whose structure a reader already knows (PDF, HTML, Word, Markdown, reStructuredText).

A reader (``bara.memory.readers``) turns a file into clean text plus blocks: headings with their
level, paragraphs, code, each with the page it sits on (PDF). :func:`chunk_structured` packs the
blocks of each heading into chunks with the same sentence packing as the plain-text chunker (so
sizes, overlap and the minimum length mean the same), and names every chunk by its heading and page:
``section`` is what a source line prints after the file name (``p. 4 §2.1 Title``, ``§Install``),
``title`` the heading without its number. Plain text and the RFC layout never come here.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

from bara.retrieval.chunking import _figure_units, _lines, _pack, _prose_units, _render, _Unit
from bara.settings import Settings
from bara.types import Chunk

BlockKind = Literal["heading", "para", "code"]

#: "2.1 Title", "2.1. Title", "A.1 Title", "1 Topologische Grundbegriffe": a section number, then words.
_NUMBERED = re.compile(r"((?:\d{1,3}|[A-Z])(?:\.\d{1,3})*\.?)\s+(\S.*)")
_PAGE = re.compile(r"^p\. \d+(?: \u00a7|$)")


@dataclass(frozen=True)
class Block:
    """One span of a structured document's text: a heading, a paragraph or a code block."""

    start: int
    end: int
    kind: BlockKind
    level: int = 0  # a heading's level, 1 = the outermost
    page: int = 0  # 1-based page of the block's start (PDF); 0 when the format has no pages


@dataclass(frozen=True)
class Structured:
    """A reader's result: the clean text and its blocks in reading order."""

    text: str
    title: str
    blocks: tuple[Block, ...]
    paged: bool = False


class Builder:
    """Assembles a structured document block by block; blocks are separated by a blank line."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._blocks: list[Block] = []
        self._pos = 0
        self.page = 0

    def heading(self, text: str, level: int) -> None:
        self._add(" ".join(text.split()), "heading", max(1, level))

    def para(self, text: str) -> None:
        """A paragraph: its own line breaks are kept (the chunker reflows them)."""
        lines = [" ".join(ln.split()) for ln in text.splitlines()]
        self._add("\n".join(ln for ln in lines if ln), "para")

    def code(self, text: str) -> None:
        """Code or a preformatted block: lines and indentation are kept."""
        lines = [ln.rstrip() for ln in text.replace("\t", "    ").splitlines()]
        while lines and not lines[0]:
            lines.pop(0)
        self._add("\n".join(lines).rstrip(), "code")

    def _add(self, text: str, kind: BlockKind, level: int = 0) -> None:
        if not text.strip():
            return
        if self._parts:
            self._parts.append("\n\n")
            self._pos += 2
        self._parts.append(text)
        self._blocks.append(Block(self._pos, self._pos + len(text), kind, level, self.page))
        self._pos += len(text)

    @property
    def has_text(self) -> bool:
        return any(b.kind != "heading" for b in self._blocks)

    def build(self, title: str, paged: bool = False) -> Structured:
        return Structured("".join(self._parts), title, tuple(self._blocks), paged)


def heading_parts(heading: str) -> tuple[str, str]:
    """(section, title) of a heading: the whole heading and the heading without its number."""
    m = _NUMBERED.fullmatch(heading)
    return heading, (m.group(2) if m else heading)


def embed_heading(section: str, title: str) -> str:
    """A chunk's heading once, without its page: "p. 4 §2.1 Title" -> "2.1 Title"."""
    return _PAGE.sub("", section, count=1) or title


def chunk_structured(doc: Structured, source: str, settings: Settings) -> list[Chunk]:
    """Chunks of ``doc``: no chunk crosses a heading; each names its heading (and page)."""
    size, lines = settings.chunk_size_chars, _lines(doc.text)
    starts = [ln.start for ln in lines]
    out: list[Chunk] = []
    heading, group = "", []
    for block in doc.blocks:
        if block.kind == "heading":
            out += _section_chunks(doc, source, heading, group, settings, len(out))
            heading, group = doc.text[block.start:block.end], []
            continue
        mine = lines[bisect_right(starts, block.start - 1):bisect_right(starts, block.end - 1)]
        mine = [ln for ln in mine if ln.text]
        if mine:
            units = (_figure_units if block.kind == "code" else _prose_units)(doc.text, mine, size)
            group.append((block, units))
    return out + _section_chunks(doc, source, heading, group, settings, len(out))


def _section_chunks(doc: Structured, source: str, heading: str, group: list[tuple[Block, list[_Unit]]],
                    settings: Settings, first: int) -> list[Chunk]:
    units = [u for _, us in group for u in us]
    if not units:
        return []
    starts, pages = [b.start for b, _ in group], [b.page for b, _ in group]
    section, title = heading_parts(heading) if heading else ("", "")
    out: list[Chunk] = []
    for packed in _pack(units, settings.chunk_size_chars, settings.chunk_overlap_chars):
        body = _render(packed)
        if len(body.strip()) < settings.min_chunk_chars and len(units) > len(packed):
            continue  # debris between longer chunks; a section's only text is kept however short
        where = section
        if doc.paged:
            page = pages[max(0, bisect_right(starts, packed[0].start) - 1)]
            where = f"p. {page}" + (f" \u00a7{section}" if section else "")
        out.append(Chunk(text=body, source=source, ordinal=first + len(out), start=packed[0].start,
                         end=packed[-1].end, section=where, title=title))
    return out
