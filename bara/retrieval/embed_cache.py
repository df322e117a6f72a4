"""On-disk embedding cache: re-indexing unchanged text should cost no model time.

Keyed by (model namespace, sha256 of the text), so vectors from different
models or truncation lengths never mix. SQLite in WAL mode with a busy
timeout lets an indexer and a searcher (two processes) share one file.

Policy on a broken cache (corrupt file, unwritable directory): the
:class:`EmbeddingCache` itself raises :class:`~bara.errors.EmbedderError`
saying which file to fix or delete; :class:`CachedEmbedder` catches that,
warns once and keeps embedding without the cache, because a cache is an
optimisation and must never make search unavailable.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from bara.errors import EmbedderError
from bara.types import text_hash

if TYPE_CHECKING:
    from bara.retrieval.protocol import Embedder

SCHEMA_VERSION = 1
#: Below SQLite's default limit of host parameters per statement (999 on old builds).
_MAX_PARAMS = 900
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model_id  TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (model_id, text_hash)
) WITHOUT ROWID
"""


class EmbeddingCacheWarning(RuntimeWarning):
    """The cache is unusable; embedding continues uncached until someone fixes the file."""


def check_texts(texts: Sequence[str]) -> list[str]:
    """Reject a bare string early: iterating it would embed single characters."""
    if isinstance(texts, (str, bytes)):
        raise EmbedderError("embed() got a single string; the caller must pass a list of texts, "
                            "e.g. embed([text])")
    out = list(texts)
    bad = [type(t).__name__ for t in out if not isinstance(t, str)]
    if bad:
        raise EmbedderError(f"embed() got a {bad[0]} among the texts; the caller must "
                            "pass str only (decode bytes, drop None)")
    return out


class EmbeddingCache:
    """SQLite file of float32 vectors; opened lazily so constructing it is free."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = 10_000):
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors found for ``hashes`` (absent ones are simply missing from the dict)."""
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(hashes), _MAX_PARAMS):
            part = list(hashes[start:start + _MAX_PARAMS])
            sql = (f"SELECT text_hash, vector FROM embeddings WHERE model_id = ? "
                   f"AND text_hash IN ({','.join('?' * len(part))})")
            for key, blob in self._execute(sql, [model_id, *part]):
                found[key] = np.frombuffer(blob, dtype=np.float32).copy()
        return found

    def put_many(self, model_id: str, items: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]]) -> None:
        """Store (hash, vector) pairs in one transaction; re-putting a key overwrites it."""
        pairs = items.items() if isinstance(items, Mapping) else items
        rows = [(model_id, key, np.asarray(vec, dtype=np.float32).tobytes()) for key, vec in pairs]
        if rows:
            self._execute("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)", rows, many=True)

    def count(self, model_id: str | None = None) -> int:
        """Number of cached vectors, for one model or all; used by stats and tests."""
        if model_id is None:
            return self._execute("SELECT COUNT(*) FROM embeddings", [])[0][0]
        return self._execute("SELECT COUNT(*) FROM embeddings WHERE model_id = ?", [model_id])[0][0]

    def close(self) -> None:
        """Close the connection; the next call reopens it."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> "EmbeddingCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _execute(self, sql: str, params: list, many: bool = False) -> list:
        """Run one statement in its own transaction; every SQLite failure becomes an EmbedderError."""
        with self._lock:
            try:
                conn = self._connection()
                with conn:
                    cursor = conn.executemany(sql, params) if many else conn.execute(sql, params)
                    return cursor.fetchall()
            except (sqlite3.Error, OSError) as exc:
                raise self._error(exc) from exc

    def _connection(self) -> sqlite3.Connection:
        """One connection per process: a connection inherited across fork() is unsafe."""
        if self._conn is None or self._pid != os.getpid():
            self._conn = self._open()
            self._pid = os.getpid()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """Create the directory and file if needed, switch to WAL, check the schema version."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            self._switch_to_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            self._ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _switch_to_wal(self, conn: sqlite3.Connection) -> None:
        """SQLite does not call the busy handler for a journal-mode change, so two processes opening a
        new cache file at once can see "database is locked" here: retry until the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        """Refuse a file written by a newer bara rather than misread it."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"schema version {version} is newer than this bara ({SCHEMA_VERSION})")
        with conn:
            conn.execute(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _error(self, exc: BaseException) -> EmbedderError:
        return EmbedderError(
            f"embedding cache {self.path} is unusable ({type(exc).__name__}: {exc}); the user should "
            "delete that file (it is only a cache) or point BARA_CACHE_DIR at a writable directory")


class CachedEmbedder:
    """Any Embedder plus an EmbeddingCache; only texts not cached reach the model.

    ``hits`` and ``misses`` count distinct texts per call (a text repeated in
    one call is embedded once), cumulated over the instance's life.
    """

    def __init__(self, inner: "Embedder", cache: EmbeddingCache):
        self.inner = inner
        self.cache = cache
        self.model_id = inner.model_id
        #: Namespace in the cache; embedders expose a finer key when settings change vectors.
        self.cache_key = getattr(inner, "cache_key", inner.model_id)
        self.hits = 0
        self.misses = 0
        self.cache_error: EmbedderError | None = None

    @property
    def dim(self) -> int:
        return self.inner.dim

    def warm(self) -> None:
        """Load the model behind the cache (a cache hit never does; see :func:`warm_embedder`)."""
        warm_embedder(self.inner)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Look up, embed what is missing, store it, and return rows in input order."""
        items = check_texts(texts)
        keys = [text_hash(t) for t in items]
        unique = dict.fromkeys(keys)
        found = self._lookup(list(unique))
        todo = {k: t for k, t in zip(keys, items, strict=False) if k not in found}
        fresh = self._embed_missing(todo)
        self.hits += len(found)
        self.misses += len(fresh)
        vectors = {**found, **fresh}
        out = np.empty((len(items), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = vectors[key]
        return out

    def _embed_missing(self, todo: dict[str, str]) -> dict[str, np.ndarray]:
        """Embed the uncached texts in one inner call and write them back."""
        if not todo:
            return {}
        fresh = dict(zip(todo, self.inner.embed(list(todo.values())), strict=False))
        self._store(fresh)
        return fresh

    def _lookup(self, keys: list[str]) -> dict[str, np.ndarray]:
        """Cached vectors of the right width; anything else counts as a miss."""
        if self.cache_error is not None or not keys:
            return {}
        try:
            found = self.cache.get_many(self.cache_key, keys)
        except EmbedderError as exc:
            self._disable(exc)
            return {}
        dim = self.dim
        return {k: v for k, v in found.items() if v.shape == (dim,)}

    def _store(self, fresh: dict[str, np.ndarray]) -> None:
        if self.cache_error is not None:
            return
        try:
            self.cache.put_many(self.cache_key, fresh)
        except EmbedderError as exc:
            self._disable(exc)

    def _disable(self, exc: EmbedderError) -> None:
        """Warn once and stop using the cache: slower search beats no search."""
        self.cache_error = exc
        warnings.warn(f"{exc}; embedding continues without the cache", EmbeddingCacheWarning, stacklevel=4)


def warm_embedder(embedder: object) -> None:
    """Load ``embedder``'s model now rather than inside the first request or turn: its ``warm()``
    when it has one (an embedder without a model to load needs none)."""
    warm = getattr(embedder, "warm", None)
    if callable(warm):
        warm()
