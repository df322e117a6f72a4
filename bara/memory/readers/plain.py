"""Plain text and the RFC layout: decoded as before and chunked by ``chunk_document`` unchanged."""

from __future__ import annotations

from bara.memory.readers.base import Unreadable


def decode(data: bytes) -> str:
    """A file's bytes as text (a UTF-8 BOM dropped). A NUL byte anywhere makes it binary: no text file
    holds one, and PostgreSQL text cannot store it."""
    if not data.strip():
        raise Unreadable("empty")
    if b"\x00" in data:
        raise Unreadable("unreadable", "binary file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unreadable("unreadable", f"not UTF-8 (invalid byte at offset {exc.start})") from None


class PlainReader:
    name = "text"
    suffixes = frozenset({".txt", ".text", ""})
    version = ""  # the hash stays the text's own, as before readers: an existing store stays unchanged

    def read(self, data: bytes) -> str:
        return decode(data)
