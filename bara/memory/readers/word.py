"""Word (.docx): paragraphs and tables in document order (python-docx); headings from paragraph styles.

"Heading N" styles are headings of level N and "Title" is the title; a hyperlink's text is part
of its paragraph; each table row becomes one line. Legacy .doc files and password-protected .docx
files (both OLE containers, not zip packages) cannot be read.
"""

from __future__ import annotations

import io
import re
import zipfile

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table

from bara.memory.readers.base import Unreadable
from bara.retrieval.structure import Builder, Structured

_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING_STYLE = re.compile(r"heading\s*(\d)", re.I)


class DocxReader:
    name = "docx"
    suffixes = frozenset({".docx"})
    version = "docx-1"

    def read(self, data: bytes) -> Structured:
        if data.startswith(_OLE):
            raise Unreadable("encrypted", "an OLE container: a password-protected .docx (or a legacy .doc)")
        try:
            document = docx.Document(io.BytesIO(data))
        except (zipfile.BadZipFile, PackageNotFoundError, KeyError, ValueError) as exc:
            raise Unreadable("unreadable", f"not a Word .docx package ({exc})") from None
        b, title = Builder(), (document.core_properties.title or "").strip()
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                b.para("\n".join(" | ".join(_unique(c.text for c in row.cells)) for row in item.rows))
                continue
            style = (item.style.name if item.style is not None else "") or ""
            level = _level(style)
            if style.lower() == "title":
                title = title or item.text.strip()
                b.heading(item.text, 1)
            elif level:
                b.heading(item.text, level)
            else:
                b.para(item.text)
        if not b.has_text:
            raise Unreadable("empty", "the document has no text")
        return b.build(title)


def _level(style: str) -> int:
    m = _HEADING_STYLE.fullmatch(style.strip())
    return int(m.group(1)) if m else 0


def _unique(cells) -> list[str]:  # noqa: ANN001 - an iterable of cell texts
    """Merged cells repeat their text in every grid column they span: once is enough."""
    out: list[str] = []
    for text in cells:
        text = " ".join(text.split())
        if text and (not out or out[-1] != text):
            out.append(text)
    return out
