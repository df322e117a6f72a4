"""The reader protocol: one small object per file format.

A reader turns a file's bytes into clean text plus its structure (:class:`bara.retrieval.structure.
Structured`), or into plain text that the plain-text/RFC chunker reads as today. A file it cannot use
raises :class:`Unreadable` with one of the reason codes ``bara ingest`` reports (``REASONS``) and a
detail for the person reading the summary. Readers never touch the network or other files.
"""

from __future__ import annotations

from typing import Protocol

from bara.retrieval.structure import Structured

#: Why a file was not indexed: the ``reason`` of each ``bara ingest --json`` "skipped" entry.
REASONS = ("unsupported format", "encrypted", "no text layer", "empty", "too large", "unreadable")


class Unreadable(Exception):
    """A file a reader cannot index: ``code`` is one of :data:`REASONS`, ``detail`` says more."""

    def __init__(self, code: str, detail: str = ""):
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code, self.detail = code, detail


class Reader(Protocol):
    """What every format reader offers."""

    #: Format name, stored in the document's meta ("pdf", "html", ...).
    name: str
    #: Lower-case file suffixes the reader takes (".pdf").
    suffixes: frozenset[str]
    #: Bumped when the reader's output changes, so stored files are read again once.
    version: str

    def read(self, data: bytes) -> Structured | str:
        """The document's structure, or plain text for the plain/RFC chunker; raises Unreadable."""
        ...
