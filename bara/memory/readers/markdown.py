"""Markdown (CommonMark plus tables, markdown-it-py): the text a reader sees, under its headings.

Inline markup is rendered to its text: emphasis, code spans, links (their text) and images (their
alt text); raw HTML is reduced to its text. Fenced and indented code stays code. MyST's
``{role}`code``` keeps the code's text (``{ref}`pip download``` reads "pip download";
``title <target>`` reads "title"), and a ```` ```{directive} ```` block is read as its body (code for
the code directives), minus its ``:option:`` lines. YAML front matter is not text; its ``title``
is the document's title when there is no first-level heading.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from bara.memory.readers.base import Unreadable
from bara.memory.readers.plain import decode
from bara.retrieval.structure import Builder, Structured

_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_FRONT_TITLE = re.compile(r"^title:\s*['\"]?(.*?)['\"]?\s*$", re.M)
_ROLE = re.compile(r"\{[\w.:+-]+\}$")
_TARGET = re.compile(r"^(.*\S)\s*<[^<>]+>$", re.S)
_TAG = re.compile(r"<!--.*?-->|<[^>]*>", re.S)
_OPTION = re.compile(r"\s*:[\w-]+:.*")
_CODE_DIRECTIVES = frozenset({"code", "code-block", "code-cell", "sourcecode", "literalinclude"})
_SKIP_DIRECTIVES = frozenset({"toctree", "contents", "include", "index", "raw", "eval-rst"})

_MD = MarkdownIt("commonmark").enable("table")


class MarkdownReader:
    name = "markdown"
    suffixes = frozenset({".md", ".markdown", ".mdown", ".mkd"})
    version = "md-1"

    def read(self, data: bytes) -> Structured:
        text = decode(data)
        front = _FRONT.match(text)
        meta_title = ""
        if front:
            m = _FRONT_TITLE.search(front.group(1))
            meta_title = m.group(1) if m else ""
            text = text[front.end():]
        b, h1 = Builder(), []
        _blocks(_MD.parse(text), b, h1)
        if not b.has_text:
            raise Unreadable("empty", "the document has no text outside its markup")
        return b.build(h1[0] if h1 else meta_title)


def _blocks(tokens: list[Token], b: Builder, h1: list[str]) -> None:
    cells: list[str] = []
    rows: list[str] = []
    for i, tok in enumerate(tokens):
        if tok.type == "inline" and i and tokens[i - 1].type == "heading_open":
            level = int(tokens[i - 1].tag[1])
            heading = _inline(tok)
            b.heading(heading, level)
            if level == 1:
                h1.append(" ".join(heading.split()))
        elif tok.type == "inline" and tok.level and _in_cell(tokens, i):
            cells.append(" ".join(_inline(tok).split()))
        elif tok.type == "inline":
            b.para(_inline(tok))
        elif tok.type == "tr_close":
            rows.append(" | ".join(c for c in cells if c))
            cells = []
        elif tok.type == "table_close":
            b.para("\n".join(r for r in rows if r))
            rows = []
        elif tok.type in ("fence", "code_block"):
            _code(tok, b, h1)
        elif tok.type == "html_block":
            b.para(_TAG.sub(" ", tok.content))


def _in_cell(tokens: list[Token], i: int) -> bool:
    return i > 0 and tokens[i - 1].type in ("th_open", "td_open")


def _code(tok: Token, b: Builder, h1: list[str]) -> None:
    info = tok.info.strip()
    if not (info.startswith("{") and "}" in info):
        b.code(tok.content)
        return
    name = info[1:info.index("}")].strip().lower()
    body = tok.content.splitlines()
    while body and _OPTION.fullmatch(body[0]):
        body.pop(0)
    if name in _SKIP_DIRECTIVES:
        return
    if name in _CODE_DIRECTIVES:
        b.code("\n".join(body))
    else:  # an admonition or other directive: its body is Markdown
        _blocks(_MD.parse("\n".join(body)), b, h1)


def _inline(tok: Token) -> str:
    out: list[str] = []
    for child in tok.children or []:
        kind = child.type
        if kind == "text":
            out.append(child.content)
        elif kind == "code_inline":
            if out and _ROLE.search(out[-1]):  # MyST role: {ref}`text <target>`
                out[-1] = _ROLE.sub("", out[-1])
                m = _TARGET.match(child.content)
                out.append(m.group(1) if m else child.content)
            else:
                out.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "image":
            out.append(child.content or "")
        elif kind == "html_inline":
            out.append("")
    return "".join(out)
