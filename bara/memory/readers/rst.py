"""reStructuredText (docutils): sections, paragraphs, lists, tables and literal blocks as text.

The document is parsed by docutils with file inclusion and raw passthrough off (nothing outside the
file is read) and its messages silenced. Over- and underlined titles are sections, never text.
Roles are rendered to their text, Sphinx's too (``:doc:`Guide <guide>``` reads "Guide"; docutils does
not know them and marks them as problems, whose source is reduced here). A directive docutils does
not know (Sphinx's ``versionadded``, ``seealso``...) is read as its body, minus its options;
``toctree``, ``index`` and the ``auto*`` directives carry no text of their own and are left out.
"""

from __future__ import annotations

import io
import re

from docutils import nodes
from docutils.core import publish_doctree
from docutils.utils import SystemMessage

from bara.memory.readers.base import Unreadable
from bara.memory.readers.plain import decode
from bara.retrieval.structure import Builder, Structured

_ROLE = re.compile(r":[\w.:+-]+:`(.*?)`(?!`)|`(.*?)`:[\w.:+-]+:", re.S)
_TARGET = re.compile(r"^(.*\S)\s*<[^<>]+>$", re.S)
_DIRECTIVE = re.compile(r"\.\.\s+([\w:.+-]+)::")
_OPTION = re.compile(r"\s*:[\w-]+:.*")
_SKIP_DIRECTIVES = re.compile(r"(toctree|index|highlight|currentmodule|module|literalinclude|auto\w+|"
                              r"default-role|default-domain|py:module|py:currentmodule|tabularcolumns)$")
#: docutils nests one state machine per indentation level, each with its own copy of the lines: 3,000 levels
#: took 1.4 GB before a RecursionError. No real document indents its text 200 columns deep.
MAX_INDENT = 200
_SETTINGS = {"report_level": 5, "halt_level": 5, "file_insertion_enabled": False, "raw_enabled": False,
             "warning_stream": io.StringIO(), "doctitle_xform": False, "sectsubtitle_xform": False,
             "input_encoding": "unicode", "syntax_highlight": "none", "_disable_config": True}
_SKIP_NODES = (nodes.comment, nodes.substitution_definition, nodes.target, nodes.raw, nodes.pending,
               nodes.footnote_reference, nodes.citation_reference)
_TEXT_BLOCKS = (nodes.paragraph, nodes.term, nodes.caption, nodes.rubric, nodes.line, nodes.attribution,
                nodes.field_name)


class RstReader:
    name = "rst"
    suffixes = frozenset({".rst", ".rest"})
    version = "rst-1"

    def read(self, data: bytes) -> Structured:
        text = decode(data)
        if max((len(ln) - len(ln.lstrip()) for ln in text.splitlines()), default=0) > MAX_INDENT:
            raise Unreadable("unreadable", f"indented more than {MAX_INDENT} columns: nested too deep to parse")
        try:
            doctree = publish_doctree(text, settings_overrides={**_SETTINGS, "warning_stream": io.StringIO()})
        except (SystemMessage, ValueError, AssertionError) as exc:
            raise Unreadable("unreadable", f"not reStructuredText docutils can parse ({exc})") from None
        b, titles = Builder(), []
        _walk(doctree, b, 0, titles)
        if not b.has_text:
            raise Unreadable("empty", "the document has no text outside its markup")
        return b.build(titles[0] if titles else "")


def _walk(node: nodes.Node, b: Builder, depth: int, titles: list[str]) -> None:
    for child in node.children:
        _node(child, b, depth, titles)


def _node(node: nodes.Node, b: Builder, depth: int, titles: list[str]) -> None:
    if isinstance(node, _SKIP_NODES) or isinstance(node, nodes.Invisible) and not isinstance(node, nodes.system_message):
        return
    if isinstance(node, nodes.system_message):
        _unknown_directive(node, b, depth, titles)
    elif isinstance(node, nodes.section):
        _walk(node, b, depth + 1, titles)
    elif isinstance(node, nodes.title):
        heading = _text(node)
        if isinstance(node.parent, nodes.section):
            b.heading(heading, depth)
            titles.append(" ".join(heading.split()))
        else:  # an admonition's or a table's title
            b.para(heading)
    elif isinstance(node, (nodes.literal_block, nodes.doctest_block)):
        b.code(node.astext())
    elif isinstance(node, nodes.table):
        rows = [" | ".join(_text(e) for e in row.children) for row in node.findall(nodes.row)]
        b.para("\n".join(rows))
    elif isinstance(node, _TEXT_BLOCKS):
        b.para(_text(node))
    elif isinstance(node, nodes.Text):
        b.para(str(node))
    else:
        _walk(node, b, depth, titles)


def _text(node: nodes.Node) -> str:
    """Inline text: roles docutils did not know are reduced from their source to their text."""
    if isinstance(node, nodes.Text):
        return str(node)
    if isinstance(node, _SKIP_NODES):
        return ""
    if isinstance(node, nodes.problematic):
        return _ROLE.sub(_role_text, node.astext())
    if isinstance(node, nodes.system_message):
        return ""
    return "".join(_text(c) for c in node.children)


def _role_text(m: re.Match) -> str:
    inner = m.group(1) if m.group(1) is not None else m.group(2)
    inner = inner.lstrip("~!")
    t = _TARGET.match(inner)
    return t.group(1) if t else inner


def _unknown_directive(msg: nodes.system_message, b: Builder, depth: int, titles: list[str]) -> None:
    """An unknown directive's message carries its source: read its body, unless it has none."""
    for block in msg.findall(nodes.literal_block):
        lines = block.astext().splitlines()
        m = _DIRECTIVE.match(lines[0]) if lines else None
        if not m or _SKIP_DIRECTIVES.match(m.group(1)):
            continue
        argument = lines[0][m.end():].strip()
        body = [ln for ln in lines[1:] if not _OPTION.fullmatch(ln)]
        source = "\n".join(ln[_indent(body):] for ln in body)
        if argument:
            b.para(_ROLE.sub(_role_text, argument))
        sub = publish_doctree(source, settings_overrides={**_SETTINGS, "warning_stream": io.StringIO()})
        _walk(sub, b, depth, titles) if not any(isinstance(c, nodes.section) for c in sub.children) else None


def _indent(lines: list[str]) -> int:
    return min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
