"""The dense arm's vectors of each search scope, held in memory between searches (SQLite store).

A scope's matrix is read once and kept with the write generations of its ``(owner, collection)``
scopes (``scope_generation``); a search whose generations differ reads it again. Memory tiers are
written on most turns (a turn's Q&A pair, notes and episode, after its answer), so that re-read
grew with the user's history: every row's vector, ~2 ms at 1,000 Q&A pairs and ~10 ms at 5,000, on
the next turn's critical path.

This connection's own inserts therefore extend the matrices: ``write_document`` reports the chunks
it added to a user's scope it did not otherwise change (``appended``), and when the outermost
transaction commits, every cached matrix of that scope whose generation was the one just before
the insert takes the new rows and the new generation. A generation moved any other way (a delete, a
replaced document, a rolled-back savepoint, another connection's or process's write) does not
match, so that matrix is read again, as before. New chunk ids are larger than every id in the table
(SQLite's rowid), so appended rows keep the matrix in id order, exactly as a fresh read orders it.
Successive versions of a scope's matrix share one growable buffer (:class:`Rows`): an extension writes
the new rows past the ones the cached version holds and hands out a longer view of the same buffer,
growing it by ``GROWTH`` when full, so storing a turn's rows costs their own size, not the tier's (the
copy it replaced was 1.6 ms per write at 20,000 rows, 7 ms at 50,000). Readers on other threads keep
the version they hold: its view ends where it ended, and rows past it are written only once no version
reaches them. The shared knowledge base, large and written only by ingest, is not extended: it is read
again on its next search, once.

The cache holds at most ``store_matrix_cache_scopes`` scopes and ``store_matrix_cache_mb`` of them
(``Matrix.nbytes``: vectors, ids and the row index), the least recently searched dropped first; a
scope larger than the whole budget is still kept, alone, since its search is using it anyway.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from bara.settings import Settings

#: ``Settings.store_matrix_cache_scopes``: a bare ``SQLiteStore`` gets the same bound.
DEFAULT_SCOPES: int = Settings.model_fields["store_matrix_cache_scopes"].default
#: ``Settings.store_matrix_cache_mb``, likewise.
DEFAULT_MB: float = Settings.model_fields["store_matrix_cache_mb"].default
#: A row's share of ``Rows.row`` (a dict entry and two int objects; tracemalloc: ~88 bytes).
ROW_INDEX_BYTES = 88


#: How much a full :class:`Rows` buffer grows (as CPython's lists do, geometrically, so that appending a
#: row costs O(1) amortised): 1.5 keeps a scope's spare capacity within half of what it holds.
GROWTH = 1.5


class Rows:
    """The buffer successive versions of one scope's matrix share: ids, vectors and the id -> row index of
    the first ``used`` rows (the last version's), with spare rows after them. Only the version that ends at
    ``used`` writes past it; the index may know ids a reader's older version does not hold, so it is read
    through :meth:`Matrix.position`, which checks the version's own length."""

    __slots__ = ("ids", "vectors", "row", "used")

    def __init__(self, ids: np.ndarray, vectors: np.ndarray, row: dict[int, int] | None = None):
        self.ids, self.vectors, self.used = ids, vectors, len(ids)
        self.row = {int(i): n for n, i in enumerate(ids)} if row is None else row

    @property
    def nbytes(self) -> int:
        """Vectors and ids with their spare capacity, and the row index (estimated per row)."""
        return int(self.vectors.nbytes + self.ids.nbytes + ROW_INDEX_BYTES * len(self.row))

    def append(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Write ``ids`` / ``vectors`` after the ``used`` rows, in a larger buffer when they do not fit (the
        old buffer stays with the versions that view it)."""
        n, end = self.used, self.used + len(ids)
        if end > len(self.ids):
            capacity = max(end, int(len(self.ids) * GROWTH))
            grown_ids = np.empty(capacity, dtype=self.ids.dtype)
            grown = np.empty((capacity, vectors.shape[1]), dtype=np.float32)
            if n:
                grown_ids[:n], grown[:n] = self.ids[:n], self.vectors[:n]
            self.ids, self.vectors = grown_ids, grown
        self.ids[n:end], self.vectors[n:end] = ids, vectors
        self.row.update((int(i), n + k) for k, i in enumerate(ids))
        self.used = end


class Matrix:
    """Vectors of one search scope, cached with the generations they were read at: a view of the first
    ``len(ids)`` rows of a :class:`Rows` buffer."""

    def __init__(self, gens: tuple[int, ...], ids: np.ndarray, vectors: np.ndarray, whole: bool = False,
                 rows: Rows | None = None, approximate: bool = False):
        self.gens, self.ids, self.vectors = gens, ids, vectors
        self.rows = Rows(ids, vectors) if rows is None else rows
        self.whole = whole  # the scope held every chunk when read (other scopes' writes do not re-read it)
        # ids only (``vectors`` has no columns): the scope is searched through its graph (sqlite_ann)
        self.approximate = approximate

    @property
    def nbytes(self) -> int:
        """What the matrix holds in memory: its buffer (spare rows included) and the row index."""
        return self.rows.nbytes

    def position(self, chunk_id: object) -> int | None:
        """The row of ``chunk_id`` in this version, or None when the version does not hold it."""
        n = self.rows.row.get(chunk_id)  # type: ignore[call-overload]
        return n if n is not None and n < len(self.ids) else None

    def __contains__(self, chunk_id: object) -> bool:
        return self.position(chunk_id) is not None

    def extended(self, position: int, gen: int, ids: np.ndarray, vectors: np.ndarray) -> "Matrix":
        """A new matrix with ``ids`` / ``vectors`` after these rows and scope ``position`` at ``gen``: written
        into the shared buffer when this version is its last (a copy otherwise, or from an empty matrix)."""
        gens = self.gens[:position] + (gen,) + self.gens[position + 1:]
        n = len(self.ids)
        rows = self.rows
        if n == 0 or rows.used != n or rows.vectors.shape[1:] != vectors.shape[1:]:
            rows = Rows(self.ids.copy(), self.vectors.copy(), {i: k for i, k in self.rows.row.items() if k < n})
        rows.append(ids, vectors)
        end = n + len(ids)
        return Matrix(gens, rows.ids[:end], rows.vectors[:end], self.whole, rows)


@dataclass(frozen=True)
class Appended:
    """Chunks one write added to scope ``(owner, collection)``, which it left at generation ``gen``."""

    owner: str
    collection: str
    gen: int
    ids: np.ndarray  # int64, ascending
    vectors: np.ndarray  # float32, one row per id


class Matrices:
    """The cached matrices by ``(owners, collections)`` key, at most ``capacity`` of them and ``budget_mb``
    MiB (the least recently used is dropped first), and the appends of the transaction under way
    (applied when it commits, dropped with what a rollback undoes). The store calls ``mark``,
    ``appended``, ``rolled_back`` and ``committed`` under its own lock; searches on several threads
    ``get`` and ``put``, so the cache and its byte count change under this object's lock."""

    def __init__(self, capacity: int = DEFAULT_SCOPES, budget_mb: float = DEFAULT_MB) -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity}: a store caches at least one scope's vectors")
        if budget_mb <= 0:
            raise ValueError(f"budget_mb={budget_mb}: the vector cache needs a positive budget")
        self.capacity, self.budget = capacity, int(budget_mb * 2**20)
        self.nbytes = 0  # of every cached matrix
        self._cache: OrderedDict[tuple[tuple[str, ...], tuple[str, ...]], Matrix] = OrderedDict()
        self._sizes: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}  # each cached matrix's nbytes
        self._keys: dict[tuple[str, str], set[tuple[tuple[str, ...], tuple[str, ...]]]] = {}  # by scope
        self._pending: list[Appended] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cache)

    def get(self, key: tuple[tuple[str, ...], tuple[str, ...]]) -> Matrix | None:
        with self._lock:
            matrix = self._cache.get(key)
            if matrix is not None:
                self._cache.move_to_end(key)
            return matrix

    def put(self, key: tuple[tuple[str, ...], tuple[str, ...]], matrix: Matrix) -> None:
        with self._lock:
            self._set(key, matrix)
            self._cache.move_to_end(key)
            for scope in _scopes(key):
                self._keys.setdefault(scope, set()).add(key)
            self._evict()

    def _set(self, key: tuple[tuple[str, ...], tuple[str, ...]], matrix: Matrix) -> None:
        # sizes as counted when cached: an extension grows the buffer the replaced version shares
        size = matrix.nbytes
        self.nbytes += size - self._sizes.get(key, 0)
        self._cache[key], self._sizes[key] = matrix, size

    def _evict(self) -> None:
        """Drop the least recently used until both bounds hold (the most recent stays, whatever its size)."""
        while len(self._cache) > self.capacity or (self.nbytes > self.budget and len(self._cache) > 1):
            old, _ = self._cache.popitem(last=False)
            self.nbytes -= self._sizes.pop(old)
            for scope in _scopes(old):
                self._keys.get(scope, set()).discard(old)

    def mark(self) -> int:
        """Where a transaction level starts in the pending appends."""
        return len(self._pending)

    def appended(self, append: Appended) -> None:
        self._pending.append(append)

    def rolled_back(self, mark: int) -> None:
        """Forget the appends made since ``mark`` (their rows are gone)."""
        del self._pending[mark:]

    def committed(self) -> list[Appended]:
        """The outermost transaction committed: extend each matrix the appends continue, in order; the
        appends, for the store's other caches of the same scopes (``sqlite_scope_bm25``)."""
        pending, self._pending = self._pending, []
        with self._lock:
            for append in pending:
                for key in list(self._keys.get((append.owner, append.collection), ())):
                    matrix, (owners, colls) = self._cache.get(key), key
                    if matrix is None or matrix.approximate:  # a graph's scope: read again, synchronised
                        continue
                    position = owners.index(append.owner) * len(colls) + colls.index(append.collection)
                    fits = matrix.vectors.shape[1:] in ((0,), append.vectors.shape[1:])  # empty, or the same width
                    if fits and matrix.gens[position] == append.gen - 1:
                        self._set(key, matrix.extended(position, append.gen, append.ids, append.vectors))
            self._evict()
        return pending


def _scopes(key: tuple[tuple[str, ...], tuple[str, ...]]) -> list[tuple[str, str]]:
    return [(o, c) for o in key[0] for c in key[1]]
