"""Format readers for the knowledge base: which reader takes a file, and reading it.

One reader per format behind one small protocol (:class:`bara.memory.readers.base.Reader`): plain
text and the RFC layout (chunked as before), Markdown, reStructuredText, HTML, PDF and Word. A reader
is imported the first time a file of its format is read, so ``bara`` starts as fast as before.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

from bara.memory.readers.base import REASONS, Reader, Unreadable
from bara.retrieval.structure import Structured
from bara.types import text_hash

#: suffix -> (module, class): the readers, loaded on first use.
_BY_SUFFIX: dict[str, tuple[str, str]] = {
    **dict.fromkeys((".txt", ".text", ""), ("plain", "PlainReader")),
    **dict.fromkeys((".md", ".markdown", ".mdown", ".mkd"), ("markdown", "MarkdownReader")),
    **dict.fromkeys((".rst", ".rest"), ("rst", "RstReader")),
    **dict.fromkeys((".html", ".htm", ".xhtml"), ("html", "HtmlReader")),
    ".pdf": ("pdf", "PdfReader"),
    ".docx": ("word", "DocxReader"),
}
_LOADED: dict[tuple[str, str], Reader] = {}

__all__ = ["REASONS", "Reader", "Unreadable", "Readout", "SUFFIXES", "reader_for", "read"]

#: Every suffix some reader takes ("" is a file without one).
SUFFIXES = frozenset(_BY_SUFFIX)


def reader_for(path: Path) -> Reader | None:
    """The reader for ``path``'s format, or None when no reader takes it."""
    key = _BY_SUFFIX.get(path.suffix.lower())
    if key is None:
        return None
    if key not in _LOADED:
        module = importlib.import_module(f"bara.memory.readers.{key[0]}")
        _LOADED[key] = getattr(module, key[1])()
    return _LOADED[key]


class Readout:
    """One file's bytes and reader: its content hash now, its content when asked (reading is the
    costly part, and an unchanged file is never read)."""

    def __init__(self, reader: Reader, data: bytes):
        self.reader, self.data = reader, data
        self._text: str | None = None
        if not reader.version:  # plain text: the hash of the decoded text, as stores have it
            self._text = str(reader.read(data))
            self.digest = text_hash(self._text)
        else:
            self.digest = hashlib.sha256(reader.version.encode() + b"\0" + data).hexdigest()

    def content(self) -> Structured | str:
        """The document (raises Unreadable); parser errors of a damaged file are ``unreadable``."""
        if self._text is not None:
            return self._text
        try:
            return self.reader.read(self.data)
        except Unreadable:
            raise
        except Exception as exc:  # noqa: BLE001 - a third-party parser on a damaged file: report, go on
            raise Unreadable("unreadable", f"{self.reader.name} reader failed: {type(exc).__name__}: {exc}"[:300]) \
                from None


def read(path: Path, max_bytes: int) -> Readout:
    """``path`` opened by its reader (raises Unreadable: unsupported format, too large, unreadable,
    empty; the plain reader also decodes here)."""
    reader = reader_for(path)
    if reader is None:
        shown = path.suffix.lower() or "(none)"
        raise Unreadable("unsupported format", f"no reader for {shown} files")
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise Unreadable("too large", f"{size:,} bytes > ingest_max_file_bytes {max_bytes:,}")
        data = path.read_bytes()
    except OSError as exc:
        raise Unreadable("unreadable", str(exc.strerror or exc)) from None
    if not data or data.isspace():
        raise Unreadable("empty")
    return Readout(reader, data)
