"""HTML: the page's main content as paragraphs under its headings (lxml).

The main content is the first ``<main>``, ``role="main"`` or ``<article>`` element, else the body.
Scripts, styles, forms, navigation, page headers and footers, sidebars and hidden elements are not
content, nor are the permalink marks documentation generators put after headings ("¶"). Links are
reduced to their text; ``<pre>`` keeps its lines; each table row becomes one line.
"""

from __future__ import annotations

import re

import lxml.etree
import lxml.html

from bara.memory.readers.base import Unreadable
from bara.retrieval.structure import Builder, Structured

_DROP_TAGS = frozenset("script style noscript template svg math nav header footer aside form button select "
                       "textarea iframe object embed canvas map head".split())
_DROP_ROLES = frozenset("navigation banner contentinfo search complementary menu menubar toolbar".split())
_DROP_CLASSES = frozenset("header footer nav navbar navigation menu sidebar sphinxsidebar related breadcrumb "
                          "breadcrumbs headerlink copiable-anchor skip-link skiplink toc-backref".split())
_BLOCKS = frozenset("p div li ul ol dl dt dd blockquote section article main table thead tbody tfoot tr "
                    "caption figure figcaption address center body hr details summary fieldset legend".split())
_CELLS = frozenset({"td", "th"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*>")


class HtmlReader:
    name = "html"
    suffixes = frozenset({".html", ".htm", ".xhtml"})
    version = "html-1"

    def read(self, data: bytes) -> Structured:
        root = _parse(data)
        title = " ".join((root.findtext(".//title") or "").split())
        main = _main(root)
        walker = _Walker()
        walker.walk(main)
        walker.flush()
        if not walker.b.has_text:
            raise Unreadable("empty", "the page has no text outside navigation, scripts and styles")
        return walker.b.build(title or (walker.h1[0] if walker.h1 else ""))


def _parse(data: bytes) -> lxml.html.HtmlElement:
    try:
        try:
            return lxml.html.document_fromstring(_XML_DECL.sub("", data.decode("utf-8-sig")))
        except UnicodeDecodeError:
            return lxml.html.document_fromstring(data)  # the page's own charset, else Latin-1
    except (lxml.etree.ParserError, ValueError) as exc:
        raise Unreadable("empty" if not data.strip() else "unreadable", f"not HTML ({exc})") from None


def _main(root: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    for path in ("//main", "//*[@role='main']", "//article"):
        found = root.xpath(path)
        if found:
            return found[0]
    body = root.find("body")
    return body if body is not None else root


def _dropped(el: lxml.html.HtmlElement) -> bool:
    if not isinstance(el.tag, str) or el.tag in _DROP_TAGS:
        return True
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    if el.get("role", "") in _DROP_ROLES:
        return True
    style = el.get("style", "").replace(" ", "").lower()
    return "display:none" in style or bool(_DROP_CLASSES.intersection(el.get("class", "").split()))


class _Walker:
    """Depth-first walk that gathers inline text into the current paragraph."""

    def __init__(self) -> None:
        self.b, self.buf, self.h1 = Builder(), [], []  # h1: the page's top headings, a title of last resort

    def flush(self) -> None:
        text = "".join(self.buf)
        self.buf = []
        self.b.para("\n".join(" ".join(ln.split()) for ln in text.split("\n")))

    def walk(self, el: lxml.html.HtmlElement) -> None:
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag in _HEADINGS:
            self.flush()
            text = " ".join(_text(el).split())
            self.b.heading(text, _HEADINGS[tag])
            if tag == "h1" and text:
                self.h1.append(text)
        elif tag == "pre":
            self.flush()
            self.b.code(_text(el))
        elif tag == "br":
            self.buf.append("\n")
        else:
            self._inner(el, tag)

    def _inner(self, el: lxml.html.HtmlElement, tag: str) -> None:
        block = tag in _BLOCKS
        if block:
            self.flush() if tag != "tr" else self.buf.append("\n")
        self.buf.append(el.text or "")
        for child in el:
            if not _dropped(child):
                self.walk(child)
                if child.tag in _CELLS:
                    self.buf.append(" | ")
            self.buf.append(child.tail or "")
        if block and tag != "tr":
            self.flush()
        elif tag == "tr":
            self.buf.append("\n")


def _text(el: lxml.html.HtmlElement) -> str:
    """The text of ``el`` without its dropped descendants (permalink marks, hidden spans)."""
    parts = [el.text or ""]
    for child in el:
        if not _dropped(child):
            parts.append("\n" if child.tag == "br" else _text(child))
        parts.append(child.tail or "")
    return "".join(parts)
