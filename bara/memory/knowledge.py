"""The knowledge-base tier: turning files into stored, embedded chunks.

Each file is one document written in one transaction: chunks are embedded
first (outside the transaction, ``ingest_embed_batch`` at a time, each batch
cached as soon as it is computed), then the old version is replaced atomically.
So a store never holds part of a document, and an interrupted ingest of a large
file resumes from the embedding cache. An unchanged file (same content hash) is
skipped before it is even read (PDF, HTML, Word, Markdown and reStructuredText files by the hash of
their bytes and reader version, text files by the hash of their text as before).

Each format has a reader (:mod:`bara.memory.readers`); a file no reader can use is reported in the
report's ``skipped`` list with one of the reason codes of ``readers.REASONS`` and a detail, never
dropped in silence. ``include`` / ``exclude`` globs choose which files of the folders are taken.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from bara.memory import readers
from bara.memory.readers.base import Unreadable
from bara.memory.readers.plain import decode
from bara.retrieval.chunking import chunk_document
from bara.retrieval.protocol import Embedder
from bara.retrieval.structure import Structured, chunk_structured, embed_heading
from bara.settings import Settings
from bara.store.base import Store
from bara.types import SHARED, Chunk, Document, text_hash

#: Suffixes some reader takes (kept for callers of the old name).
TEXT_SUFFIXES = readers.SUFFIXES


@dataclass(frozen=True)
class FileOutcome:
    path: str
    status: str  # written | unchanged | skipped | pruned
    chunks: int = 0
    reason: str = ""


@dataclass
class IngestReport:
    """Running totals of one ingest; the CLI prints it as the summary."""

    files_read: int = 0
    written: int = 0
    unchanged: int = 0
    pruned: int = 0
    chunks_written: int = 0
    chunks_unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, "code: detail")
    excluded: int = 0  # files of the folders left out by include/exclude
    seconds: float = 0.0
    interrupted: bool = False

    def add(self, outcome: FileOutcome) -> None:
        if outcome.status == "skipped":
            self.skipped.append((outcome.path, outcome.reason))
            return
        if outcome.status == "pruned":
            self.pruned += 1
            return
        self.files_read += 1
        if outcome.status == "written":
            self.written += 1
            self.chunks_written += outcome.chunks
        else:
            self.unchanged += 1
            self.chunks_unchanged += outcome.chunks


@dataclass(frozen=True)
class Selection:
    """Which files of the folders to take: ``include`` globs (any; none = all), then ``exclude``.
    A glob matches a file's name or its path under the folder named (``*.pdf``, ``drafts/*``)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def takes(self, path: Path, root: Path) -> bool:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            rel = path.name
        names = (path.name, rel)
        if self.include and not any(fnmatch(n, g) for g in self.include for n in names):
            return False
        return not any(fnmatch(n, g) for g in self.exclude for n in names)


def discover(paths: Sequence[str | Path] | str | Path, select: Selection | None = None,
             excluded: list[Path] | None = None) -> tuple[list[Path], list[FileOutcome]]:
    """Expand folders into their files (sorted per folder, hidden ones aside); report what cannot be
    read as skipped: missing paths, devices and pipes named outright, folders and entries that cannot be
    listed or examined. Files ``select`` leaves out go to ``excluded``. One path may be passed on its
    own (a string is a path, never a list of characters)."""
    files: list[Path] = []
    skipped: list[FileOutcome] = []
    select = select or Selection()
    for raw in as_paths(paths):
        p = Path(raw).expanduser()
        try:
            found = _walk(p, skipped) if p.is_dir() else [p] if p.is_file() else None
            if found is None:
                skipped.append(_skip(p, "unreadable: not a regular file (a device, pipe or socket)" if p.exists()
                                     else "unreadable: not found"))
                continue
            root = p if p.is_dir() else p.parent
            for f in found:
                (files if select.takes(f, root) else excluded if excluded is not None else []).append(f)
        except OSError as exc:
            skipped.append(_skip(p, f"unreadable: {exc.strerror or exc}"))
    return files, skipped


def as_paths(paths: Sequence[str | Path] | str | Path) -> list[str | Path]:
    """``paths`` as a list: one path given on its own is a list of one."""
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


def _walk(folder: Path, skipped: list[FileOutcome]) -> list[Path]:
    """The text-like files under ``folder``, sorted; folders that cannot be listed and entries that
    cannot be examined are reported in ``skipped`` instead of ending the walk."""
    found: list[Path] = []

    def unlistable(exc: OSError) -> None:
        skipped.append(_skip(Path(exc.filename or folder), f"unreadable: folder: {exc.strerror or exc}"))

    for top, _dirs, names in os.walk(folder, onerror=unlistable):
        for name in names:
            path = Path(top) / name
            try:
                if not name.startswith(".") and path.is_file():
                    found.append(path)
            except OSError as exc:
                skipped.append(_skip(path, f"unreadable: {exc.strerror or exc}"))
    return sorted(found)


def _skip(path: Path, reason: str) -> FileOutcome:
    return FileOutcome(printable_path(str(path)), "skipped", reason=reason)


def printable_path(path: str) -> str:
    """``path`` with bytes that are not UTF-8 shown as escapes (\\udcff), safe to store and print."""
    return path.encode("utf-8", "backslashreplace").decode("utf-8")


def read_text(path: Path) -> tuple[str | None, str]:
    """The file's text, or None and the reason it cannot be used."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, f"unreadable: {exc.strerror or exc}"
    return decode_text(data)


def decode_text(data: bytes) -> tuple[str | None, str]:
    """A file's bytes as text (a UTF-8 BOM dropped), or None and the reason they cannot be used
    (``empty``, ``unreadable: binary file``, ``unreadable: not UTF-8 ...``)."""
    try:
        return decode(data), ""
    except Unreadable as exc:
        return None, str(exc)


def nothing_readable(paths: Sequence[str | Path] | str | Path, settings: Settings,
                     select: Selection | None = None) -> IngestReport | None:
    """None as soon as one file under ``paths`` can be read; else the report of a run that would
    index nothing (every file skipped, with its reason), made without opening a store. The file found
    readable is read again by the ingest (one extra read, of one file)."""
    excluded: list[Path] = []
    files, skipped = discover(paths, select, excluded)
    report = IngestReport(excluded=len(excluded))
    for path in files:
        try:
            readers.read(path, settings.ingest_max_file_bytes).content()
            return None
        except Unreadable as exc:
            skipped.append(_skip(path.resolve(), str(exc)))
    for outcome in skipped:
        report.add(outcome)
    return report


class KnowledgeBase:
    """Ingest files into the shared (or one user's) ``kb`` collection of a Store."""

    def __init__(self, store: Store, embedder: Embedder, settings: Settings,
                 owner: str = SHARED, collection: str = "kb"):
        self.store, self.embedder, self.settings = store, embedder, settings
        self.owner, self.collection = owner, collection

    def ingest(self, paths: Sequence[str | Path] | str | Path, prune: bool = False,
               progress: Callable[[FileOutcome], None] | None = None,
               select: Selection | None = None) -> IngestReport:
        """Ingest every file under ``paths`` (or the one path given) that ``select`` takes; Ctrl-C
        stops cleanly between documents."""
        report, start = IngestReport(), time.perf_counter()
        paths, excluded = as_paths(paths), []
        files, missing = discover(paths, select, excluded)
        report.excluded = len(excluded)
        for outcome in missing:
            report.add(outcome)
        try:
            for outcome in self._each(files, paths, prune):
                report.add(outcome)
                if progress:
                    progress(outcome)
        except KeyboardInterrupt:
            report.interrupted = True  # the document in flight rolled back; committed ones are whole
        report.seconds = time.perf_counter() - start
        return report

    def _each(self, files: list[Path], roots: Sequence[str | Path], prune: bool) -> Iterable[FileOutcome]:
        for path in files:
            yield self.ingest_file(path)
        if prune:
            yield from self.prune(roots)

    def ingest_file(self, path: Path) -> FileOutcome:
        source = str(path.resolve())
        if printable_path(source) != source:  # the name has bytes that are not UTF-8
            return FileOutcome(printable_path(source), "skipped",
                               reason="unreadable: file name is not valid UTF-8: rename the file to ingest it")
        try:
            readout = readers.read(path, self.settings.ingest_max_file_bytes)
            if self.store.document_hash(source, self.owner, self.collection) == readout.digest:
                return FileOutcome(source, "unchanged", self._count(source))
            content = readout.content()
        except Unreadable as exc:
            return self._unusable(source, exc)
        if isinstance(content, str):
            return self.add_text(source, content, readout.digest)
        return self.add_structured(source, content, readout.digest, readout.reader.name)

    def add_upload(self, source: str, data: bytes) -> FileOutcome:
        """Store an uploaded file's bytes under ``source``, read by the reader its suffix names (PDF, HTML,
        Word, Markdown, reStructuredText). Plain text and unknown suffixes are decoded as UTF-8 text, as
        uploads always were. Raises Unreadable (``encrypted``, ``no text layer``, ``unreadable``, and
        ``unreadable: binary file`` / ``not UTF-8`` for text) with nothing stored."""
        reader = readers.reader_for(Path(source))
        if reader is None or not reader.version:  # plain text, or a suffix no reader takes: UTF-8 text
            text = decode(data) if data.strip() else ""
            return self.add_text(source, text)
        if not data.strip():
            return self._unusable(source, Unreadable("empty"))
        readout = readers.Readout(reader, data)
        content = readout.content()
        if isinstance(content, str):
            return self.add_text(source, content, readout.digest)
        return self.add_structured(source, content, readout.digest, reader.name)

    def add_structured(self, source: str, doc: Structured, digest: str, kind: str) -> FileOutcome:
        """Store a reader's document: chunks named by heading (and page), replacing any old version."""
        chunks = chunk_structured(doc, source, self.settings)
        if not chunks:
            return self._unusable(source, Unreadable("empty", "no text to index"))
        vectors = self._embed(doc.title, chunks, structured=True)
        meta = {"format": kind, **({"pages": max(b.page for b in doc.blocks)} if doc.paged else {})}
        self.store.write_document(Document(source=source, content_hash=digest, chunks=tuple(chunks),
                                           collection=self.collection, owner=self.owner, title=doc.title,
                                           meta=meta), vectors)
        return FileOutcome(source, "written", len(chunks))

    def add_text(self, source: str, text: str, digest: str | None = None,
                 meta: dict | None = None) -> FileOutcome:
        """Chunk, embed and store one text under ``source`` (replacing any old version)."""
        title, chunks = chunk_document(text, source, self.settings)
        if not chunks and text.strip():  # a document shorter than one fragment is still a document
            chunks = [Chunk(text=text.strip(), source=source, ordinal=0, start=0, end=len(text))]
        if not chunks:
            return self._unusable(source, Unreadable("empty", "no text to index"))
        vectors = self._embed(title, chunks)
        doc = Document(source=source, content_hash=digest or text_hash(text), chunks=tuple(chunks),
                       collection=self.collection, owner=self.owner, title=title, meta=meta or {})
        self.store.write_document(doc, vectors)
        return FileOutcome(source, "written", len(chunks))

    def _embed(self, title: str, chunks: list[Chunk], structured: bool = False) -> np.ndarray:
        """Vectors of every chunk, embedded ``ingest_embed_batch`` at a time into one array."""
        step = self.settings.ingest_embed_batch
        text = _structured_embed_text if structured else _embed_text
        out = np.empty((len(chunks), self.embedder.dim), dtype=np.float32)
        for start in range(0, len(chunks), step):
            part = chunks[start:start + step]
            out[start:start + len(part)] = self.embedder.embed([text(title, c) for c in part])
        return out

    def _unusable(self, source: str, exc: Unreadable) -> FileOutcome:
        """Skip the file; if it became empty since the last ingest, its stale chunks go too."""
        why = str(exc)
        if exc.code == "empty" and self.store.delete_document(source, self.owner, self.collection):
            why = f"empty: {exc.detail + ', ' if exc.detail else ''}stored version removed"
        return FileOutcome(source, "skipped", reason=why)

    def prune(self, roots: Sequence[str | Path] | str | Path) -> Iterable[FileOutcome]:
        """Remove stored documents under ``roots`` (or the one root given) whose file no longer exists."""
        resolved = [str(Path(r).expanduser().resolve()) for r in as_paths(roots)]
        prefixes = tuple(r.rstrip(os.sep) + os.sep for r in resolved)  # "docs" must not prune "docs2"
        for source in self.store.list_sources(self.owner, self.collection):
            if (source in resolved or source.startswith(prefixes)) and not Path(source).exists():
                self.store.delete_document(source, self.owner, self.collection)
                yield FileOutcome(source, "pruned")

    def _count(self, source: str) -> int:
        rows = self.store.query("SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id"
                                " WHERE d.owner=? AND d.collection=? AND d.source=?",
                                (self.owner, self.collection, source))
        return int(rows[0][0])


def _structured_embed_text(title: str, chunk: Chunk) -> str:
    """A reader's chunk: its heading once (the section without the page), then the text."""
    heading = embed_heading(chunk.section, chunk.title)
    return f"{heading}\n{chunk.text}" if heading else chunk.text


def _embed_text(title: str, chunk: Chunk) -> str:
    """What the dense arm sees: the section heading gives a short chunk its topic."""
    heading = " ".join(filter(None, (chunk.section, chunk.title)))
    return f"{heading}\n{chunk.text}" if heading else chunk.text
