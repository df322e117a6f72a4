"""The embedded default Store: one SQLite file, FTS5 ``bm25()`` and exact numpy vectors.

Why exact numpy search rather than sqlite-vec: at 6k and 100k chunks both are
brute force; numpy over a cached float32 matrix was faster in our benchmark
(docs/benchmarks.md) and needs no loadable extension (this Python's sqlite3
cannot load extensions). The matrix is cached per (owner, collection) scope
and reloaded only when that scope's generation counter changes, which every
write bumps in the same transaction, so other processes' writes are seen.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from bara.errors import MissingStoreError, StoreError
from bara.store.base import DOOMED, LexicalPrefetch, storable_document, storable_params
from bara.store.migrations import Migration, sqlite_migrations
from bara.store.sqlite_schema import migrate
from bara.store.sqlite_files import (DEFAULT_BUSY_TIMEOUT_S, check_identity, check_integrity, closed_clean, mark_clean,
                                     connect_file, exists, file_problem, reader_uri)
from bara.store.sqlite_ann import DEFAULT as DEFAULT_ANN
from bara.store.sqlite_ann import AnnConfig, Graphs, approximate_dense, approximate_matrix
from bara.store.sqlite_conns import Readers, WriterLock
from bara.store.sqlite_lexicons import DEFAULT_TOPK_MIN, Lexicons
from bara.store.sqlite_lexical import (LexicalWorker, collect, index_chunk, lexical_arm, members, runner,
                                      scope_table_rows, unindex_document)
from bara.store.sqlite_matrix import DEFAULT_MB, DEFAULT_SCOPES, Appended, Matrices, Matrix
from bara.store.sqlite_scope_bm25 import DEFAULT_LEXICON_SCOPES, ScopeLexicons
from bara.store.sqlite_sql import chunks_sql, generations, marks, prefix_end, stored_chunk
from bara.text.fusion import weighted_rrf
from bara.types import (SHARED, ArmScore, Candidate, Document, SearchRequest, StoredChunk,
                        StoreSearchResult)

#: How a command opens a store: ``read`` needs an existing file and works on a read-only one;
#: ``write`` may create the file; ``update`` writes but never creates (e.g. deleting memory).
MODES = ("read", "write", "update")


class SQLiteStore:
    """Store protocol over one SQLite file (or ``:memory:``)."""

    def __init__(self, path: str | Path, migrations: Sequence[Migration] | None = None, *, mode: str = "write",
                 matrix_scopes: int = DEFAULT_SCOPES, matrix_mb: float = DEFAULT_MB,
                 lexicon_scopes: int = DEFAULT_LEXICON_SCOPES, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
                 ann: AnnConfig = DEFAULT_ANN, lexicon_topk_min: int = DEFAULT_TOPK_MIN,
                 integrity: str = "always"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.location = str(path)
        self._lock = WriterLock(self.location, busy_timeout_s)  # bounded; reads never take it (sqlite_conns)
        self._depth = 0
        self._matrices = Matrices(matrix_scopes, matrix_mb)  # the dense arm's scope vectors (sqlite_matrix)
        self._scope_reads = 0
        self._graphs = Graphs(self.location, ann)  # large scopes' approximate dense arm (sqlite_ann)
        existed = exists(self.location)
        if not existed and mode != "write":
            raise MissingStoreError(self.location)
        was_clean = existed and integrity == "changed" and closed_clean(self.location)
        self._vouch = False  # set once a writer's open passed (or could skip) the page check
        self._conn, self.read_only = connect_file(self.location, mode, busy_timeout_s)
        self._readers = Readers(reader_uri(self.location), busy_timeout_s)  # a read connection per thread
        self._worker = LexicalWorker(self.location, reader_uri(self.location)) if self.location != ":memory:" else None
        # the shared scopes' full-text rows, scored in memory (built on their own read-only connection)
        self._lexicons = Lexicons(SHARED, self._worker.uri if self._worker is not None else None,
                                  None if self._worker is None else str(Path(self.location).expanduser().resolve()),
                                  lexicon_topk_min)
        # users' memory scopes' full-text rows, scored over each searched scope's own statistics
        self._scopes = ScopeLexicons(lexicon_scopes)
        with self._translated():
            check_identity(self._conn, self.location)
            # whether this open read every page (False: the file is as a clean close left it)
            self.integrity_checked = existed and mode != "read" and \
                check_integrity(self._conn, self.location, was_clean)
            migrate(self._conn, self.location, self.read_only, self.transaction,
                    list(migrations) if migrations is not None else sqlite_migrations())
        self._vouch = mode != "read" and self.location != ":memory:"

    # ----------------------------------------------------------------- SQL runner
    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._lock, self._translated():
            return self._conn.execute(sql, storable_params(params)).rowcount

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._lock, self._translated():
            self._conn.executemany(sql, (storable_params(r) for r in rows))

    def write(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.execute(sql, params)  # no round trips to save: at once

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        reader = None if self._lock.mine() else self._readers.get()  # a writing thread reads its own rows
        if reader is None:
            with self._lock, self._translated():
                return self._conn.execute(sql, storable_params(params)).fetchall()
        with self._translated():
            return reader.execute(sql, storable_params(params)).fetchall()

    def query_many(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        if self._lock.mine():  # a writing thread reads its own rows, inside its transaction
            return [self.query(sql, params) for sql, params in statements]
        with self._readers.snapshot():  # one read transaction: every answer as of the same moment
            return [self.query(sql, params) for sql, params in statements]

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """A damaged or read-only file becomes a StoreError naming the file and the fix; other
        SQLite errors (constraints, locks) pass through for the caller to handle."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            problem = file_problem(exc, self.location)
            if problem is None:
                raise
            self._vouch = False  # a file that failed is never marked clean
            raise problem from exc

    @contextmanager
    def transaction(self, flat: bool = False) -> Iterator[None]:
        """BEGIN IMMEDIATE at the outermost level, savepoints inside (none inside a ``flat`` one, see
        :meth:`bara.store.base.SqlRunner.transaction`); rollback on any exception (KeyboardInterrupt
        included), so a document is stored whole or not at all."""
        with self._lock, self._translated():
            if self._depth and self._flat:
                yield from self._flat_level()
                return
            outer = self._depth == 0
            if outer:
                self._flat, self._doomed = flat, False
            self._conn.execute("BEGIN IMMEDIATE" if outer else f"SAVEPOINT sp{self._depth}")
            self._depth += 1
            mark = self._matrices.mark()
            try:
                yield
            except BaseException:
                self._depth -= 1
                self._matrices.rolled_back(mark)
                if outer and not self._conn.in_transaction:  # SQLite rolled back already (a full disk, I/O)
                    raise
                self._conn.execute("ROLLBACK" if outer else f"ROLLBACK TO sp{self._depth}")
                if not outer:
                    self._conn.execute(f"RELEASE sp{self._depth}")
                raise
            self._depth -= 1
            if outer and self._doomed:
                self._matrices.rolled_back(mark)
                self._conn.execute("ROLLBACK")
                raise StoreError(DOOMED)
            try:
                self._conn.execute("COMMIT" if outer else f"RELEASE sp{self._depth}")
            except BaseException:
                self._matrices.rolled_back(mark)
                if outer and self._conn.in_transaction:  # a COMMIT that failed (disk full) leaves it open:
                    self._conn.execute("ROLLBACK")  # roll back, so the next transaction can begin
                raise
            if outer:
                self._scopes.committed(runner(self._conn), self._matrices.committed())

    def _flat_level(self) -> Iterator[None]:
        """A level inside a flat transaction: no savepoint; a failure through it dooms the transaction."""
        self._depth += 1
        try:
            yield
        except BaseException:
            self._doomed = True
            raise
        finally:
            self._depth -= 1

    @contextmanager
    def scoped(self, owners: Sequence[str]) -> Iterator[None]:
        """No database-side row security in SQLite: every query's WHERE clause does the scoping."""
        yield

    # ------------------------------------------------------------------ documents
    def document_hash(self, source: str, owner: str = SHARED, collection: str = "kb") -> str | None:
        rows = self.query("SELECT content_hash FROM documents WHERE owner=? AND collection=? AND source=?",
                          (owner, collection, source))
        return rows[0][0] if rows else None

    def list_sources(self, owner: str = SHARED, collection: str = "kb", prefix: str = "") -> list[str]:
        # SQLite compares text bytewise (UTF-8, code point order), so the sources starting with ``prefix``
        # are one range of the unique (owner, collection, source) index; substr keeps the test exact
        sql, params = "SELECT source FROM documents WHERE owner=? AND collection=?", [owner, collection]
        if prefix:
            sql, params = sql + " AND source >= ? AND substr(source, 1, ?) = ?", params + [prefix, len(prefix), prefix]
            upper = prefix_end(prefix)
            if upper is not None:
                sql, params = sql + " AND source < ?", params + [upper]
        return [r[0] for r in self.query(sql + " ORDER BY source", tuple(params))]

    def write_document(self, doc: Document, vectors: np.ndarray) -> int:
        with self.transaction():
            doc_id, replaced, ids, vecs, doc = self._put(doc, vectors)
            gen = self._bump(doc.owner, doc.collection)
            if not replaced and doc.owner != SHARED:  # a user's tier, only added rows: its cached
                # matrices take them at commit (a knowledge base, written by ingest, is read again)
                self._matrices.appended(Appended(doc.owner, doc.collection, gen, ids, vecs))
        return doc_id

    def write_documents(self, items: Sequence[tuple[Document, np.ndarray]]) -> list[int]:
        """Many documents in one transaction (a bulk load), each written as :meth:`write_document` writes it,
        each scope's generation moved once: a search's cached matrix of those scopes is read again."""
        with self.transaction():
            written = [self._put(doc, vectors) for doc, vectors in items]
            for owner, collection in dict.fromkeys((w[4].owner, w[4].collection) for w in written):
                self._bump(owner, collection)
        return [w[0] for w in written]

    def _put(self, doc: Document, vectors: np.ndarray) -> tuple[int, bool, np.ndarray, np.ndarray, Document]:
        """Replace ``doc``'s rows (call inside a transaction): (doc id, replaced?, chunk ids, vectors, doc)."""
        if len(doc.chunks) != len(vectors):
            raise ValueError(f"{len(doc.chunks)} chunks but {len(vectors)} vectors for {doc.source}")
        vecs, doc = np.ascontiguousarray(vectors, dtype=np.float32), storable_document(doc)
        replaced = self._delete(doc.source, doc.owner, doc.collection)
        cur = self._conn.execute(
            "INSERT INTO documents (owner, collection, source, title, content_hash, meta, updated_at)"
            " VALUES (?,?,?,?,?,?,?)",
            (doc.owner, doc.collection, doc.source, doc.title, doc.content_hash, json.dumps(dict(doc.meta)), time.time()))
        assert cur.lastrowid is not None  # an INSERT always sets it
        doc_id = int(cur.lastrowid)
        ids = np.array([self._insert_chunk(doc_id, doc, chunk, vec) for chunk, vec in zip(doc.chunks, vecs, strict=False)],
                       dtype=np.int64)
        return doc_id, replaced, ids, vecs, doc

    def _insert_chunk(self, doc_id: int, doc: Document, chunk: Any, vec: np.ndarray) -> int:
        cur = self._conn.execute(
            "INSERT INTO chunks (doc_id, owner, collection, ordinal, text, section, title, start_char,"
            " end_char, content_hash, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (doc_id, doc.owner, doc.collection, chunk.ordinal, chunk.text, chunk.section, chunk.title,
             chunk.start, chunk.end, chunk.content_hash, vec.tobytes()))
        heading = " ".join(filter(None, (doc.title, chunk.section, chunk.title)))
        index_chunk(self._conn, int(cur.lastrowid or 0), doc.owner, doc.collection, chunk.text, heading)
        return int(cur.lastrowid or 0)

    def delete_document(self, source: str, owner: str = SHARED, collection: str = "kb") -> bool:
        with self.transaction():
            found = self._delete(source, owner, collection)
            if found:
                self._bump(owner, collection)
        self._scopes.forget(owner)
        return found

    def delete_owner(self, owner: str, collection: str | None = None) -> int:
        sql = "SELECT source, collection FROM documents WHERE owner=?"
        params: tuple = (owner,)
        if collection is not None:
            sql, params = sql + " AND collection=?", (owner, collection)
        rows = self.query(sql, params)
        with self.transaction():
            for source, coll in rows:
                self._delete(source, owner, coll)
                self._bump(owner, coll)
        self._scopes.forget(owner)
        return len(rows)

    def _delete(self, source: str, owner: str, collection: str) -> bool:
        row = self._conn.execute("SELECT id FROM documents WHERE owner=? AND collection=? AND source=?",
                                 (owner, collection, source)).fetchone()
        if row is None:
            return False
        unindex_document(self._conn, row[0], owner)
        self._conn.execute("DELETE FROM chunks WHERE doc_id=?", (row[0],))
        self._conn.execute("DELETE FROM documents WHERE id=?", (row[0],))
        return True

    def _bump(self, owner: str, collection: str) -> int:
        """Move the scope's write generation on; returns the new one."""
        return int(self._conn.execute(
            "INSERT INTO scope_generation (owner, collection, gen) VALUES (?,?,1)"
            " ON CONFLICT (owner, collection) DO UPDATE SET gen = gen + 1 RETURNING gen",
            (owner, collection)).fetchone()[0])

    # --------------------------------------------------------------------- search
    def prefetch_lexical(self, request: SearchRequest) -> LexicalPrefetch | None:
        """Start ``request``'s lexical arm on the worker connection (see ``sqlite_lexical``)."""
        if self._worker is None or not (request.use_lexical and request.terms):
            return None
        return self._worker.start(request, lambda run: self._ahead(run, request))

    def search(self, request: SearchRequest) -> StoreSearchResult:
        return self.search_prefetched(request, None)

    def search_prefetched(self, request: SearchRequest, prefetched: LexicalPrefetch | None) -> StoreSearchResult:
        if self._lock.mine():  # inside this thread's write: its own rows, on the writer's connection
            return self._search(request, prefetched)
        with self._translated(), self._readers.snapshot():  # generations, vectors and statistics of one moment
            return self._search(request, prefetched)

    def _search(self, request: SearchRequest, prefetched: LexicalPrefetch | None) -> StoreSearchResult:
        timings: dict[str, float] = {}
        tm = time.perf_counter()
        matrix = self._matrix(request.owners, request.collections)  # the dense arm's, read first for the lexical
        t0 = time.perf_counter()
        lexical = self._lexical(request, prefetched, matrix) if request.use_lexical and request.terms else []
        t1 = time.perf_counter()
        dense, sims = self._dense(request, matrix, lexical)
        t2 = time.perf_counter()
        candidates = self._fuse(request, lexical, dense, sims)
        t3 = time.perf_counter()
        timings.update(lexical=(t1 - t0) * 1e3, dense=(t2 - t1 + t0 - tm) * 1e3, fusion=(t3 - t2) * 1e3)
        return StoreSearchResult(tuple(candidates), len(lexical), len(dense), timings)

    def _lexical(self, req: SearchRequest, prefetched: LexicalPrefetch | None, m: Matrix) -> list[tuple[int, float]]:
        lexicon = self._lexicons.lexicon(req.owners, req.collections, m.gens,
                                         lambda run: generations(run, req.owners, req.collections), req.in_memory_after) \
            if req.in_memory_lexical and len(m.ids) >= req.in_memory_min_chunks else None
        rows = collect(prefetched, req)
        if rows is None:
            rows = self._scopes.arm(self.query, req, m.gens, not self._lock.mine(),
                                    lambda shared: lexical_arm(self.query, shared, None))
        if rows is None and lexicon is not None:
            rows = lexicon.rows(self.query, req.terms, req.title_weight, req.limit)
        return rows if rows is not None else lexical_arm(self.query, req, members(self.query, m, req))

    def _ahead(self, run: Any, req: SearchRequest) -> list[tuple[int, float]]:
        """The prefetch worker's lexical arm, as of ``run``'s connection (one read of the scope's
        generations): a users' memory scope over its own statistics (``bara.store.sqlite_scope_bm25``),
        the knowledge base's in-memory lexicon when it is current (``bara.store.sqlite_bm25``), else
        FTS5's query, without the scope test when the cached matrix is current and whole."""
        gens = generations(run, req.owners, req.collections)
        rows = self._scopes.arm(run, req, gens, True, lambda shared: lexical_arm(run, shared, None))
        if rows is not None:
            return rows
        key = (tuple(req.owners), tuple(req.collections))
        lexicon = self._lexicons.current(*key, gens) if req.in_memory_lexical else None
        rows = None if lexicon is None else lexicon.rows(run, req.terms, req.title_weight, req.limit)
        if rows is not None:
            return rows
        cached = self._matrices.get(key)
        return lexical_arm(run, req, None if cached is None or cached.gens != gens else members(run, cached, req))

    def _dense(self, req: SearchRequest, m: Matrix,
               lexical: list[tuple[int, float]]) -> tuple[list[tuple[int, float]], Callable[[int], float]]:
        """The dense arm's (id, similarity) ranking and every candidate's similarity (0.0 without a vector)."""
        if req.vector is None or len(m.ids) == 0:
            return [], lambda cid: 0.0
        if m.approximate:  # a large scope: its graph's candidates, scored exactly (sqlite_ann)
            key = (tuple(req.owners), tuple(req.collections))
            dense, sim = approximate_dense(self.query, self._graphs, key, m.gens, req.vector,
                                           req.limit if req.use_dense else 0, [cid for cid, _ in lexical])
            return dense, lambda cid: sim.get(cid, 0.0)
        sims = m.vectors @ np.asarray(req.vector, dtype=np.float32)

        def similarity(cid: int) -> float:
            row = m.position(cid)
            return float(sims[row]) if row is not None else 0.0

        if not req.use_dense:
            return [], similarity
        n = min(req.limit, len(sims))
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.lexsort((m.ids[top], -sims[top]))]
        return [(int(m.ids[i]), float(sims[i])) for i in top], similarity

    def _fuse(self, req: SearchRequest, lexical: list, dense: list, similarity: Callable[[int], float]) -> list[Candidate]:
        lex = {cid: (rank, score) for rank, (cid, score) in enumerate(lexical, start=1)}
        den = {cid: (rank, score) for rank, (cid, score) in enumerate(dense, start=1)}
        fused = weighted_rrf([[c for c, _ in lexical], [c for c, _ in dense]],
                             [req.weight_lexical, req.weight_dense], req.rrf_k)
        return [Candidate(cid, score, ArmScore(*lex.get(cid, (None, None))), ArmScore(*den.get(cid, (None, None))),
                          similarity(cid)) for cid, score in fused]

    def _matrix(self, owners: Sequence[str], colls: Sequence[str]) -> Matrix:
        key = (tuple(owners), tuple(colls))
        gens = generations(self.query, owners, colls)
        cached = self._matrices.get(key)
        if cached is not None and cached.gens == gens:
            return cached
        self._scope_reads += 1
        if self._graphs.eligible(self.query, key):  # a large scope: ids only, its vectors are in its graph
            matrix = approximate_matrix(self.query, key, gens)
            matrix.whole = len(matrix.ids) == scope_table_rows(self.query, owners)
            self._matrices.put(key, matrix)
            return matrix
        rows = self.query(f"SELECT id, embedding FROM chunks WHERE owner IN ({marks(owners)})"
                          f" AND collection IN ({marks(colls)}) ORDER BY id", (*owners, *colls))
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        vecs = (np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
                if rows else np.zeros((0, 0), dtype=np.float32))
        matrix = Matrix(gens, ids, vecs, len(ids) == scope_table_rows(self.query, owners))
        self._matrices.put(key, matrix)
        return matrix

    # ---------------------------------------------------------------------- reads
    def get_chunks(self, ids: Sequence[int], owners: Sequence[str] | None = None) -> list[StoredChunk]:
        if not ids:
            return []
        params: tuple = (*(int(i) for i in ids), *(owners or ()))
        by_id = {r[0]: stored_chunk(r) for r in self.query(chunks_sql(len(ids), None if owners is None else len(owners)),
                                                      params)}
        return [by_id[i] for i in ids if i in by_id]

    def count_chunks(self, owner: str | None = None, collection: str | None = None) -> int:
        sql, params = "SELECT COUNT(*) FROM chunks WHERE 1=1", []
        if owner is not None:
            sql, params = sql + " AND owner=?", params + [owner]
        if collection is not None:
            sql, params = sql + " AND collection=?", params + [collection]
        return int(self.query(sql, params)[0][0])

    def has_chunks(self, owner: str, collection: str) -> bool:
        return bool(self.query("SELECT EXISTS (SELECT 1 FROM chunks WHERE owner=? AND collection=?)",
                               (owner, collection))[0][0])

    def wait_for_indexes(self) -> None:
        """Until the in-memory full-text indexes being built are ready (``Bara.warm``)."""
        self._lexicons.wait()

    @property
    def scope_reads(self) -> int:
        """How many times a search read a scope's rows from the file because no current cached matrix held
        them: the cost the matrix cache saves (tests and benches assert it, not the SQL run)."""
        return self._scope_reads

    def trace(self, callback: Any) -> None:
        """Every statement SQLite runs on this store's connections (writer and readers) to ``callback``."""
        self._conn.set_trace_callback(callback)
        self._readers.trace(callback)

    def close(self) -> None:
        self._lexicons.close()
        if self._worker is not None:
            self._worker.close()
        self._readers.close()
        with self._lock:
            self._conn.close()
            if self._vouch and not self.read_only:
                mark_clean(self.location)

    def __enter__(self) -> "SQLiteStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
