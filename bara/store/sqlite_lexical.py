"""The SQLite store's lexical arm: FTS5 ``bm25()`` over the analysed terms, and a second, read-only
connection that runs it ahead of the search.

Two FTS5 tables hold the rows, by owner: ``chunks_fts`` the shared knowledge
base's (owner ``SHARED``), ``memory_fts`` every user's (Q&A pairs, notes, episodic turns). FTS5's
``bm25()`` takes N, each term's document frequency and the average length from its whole table, so
in one table every user's memory moved the knowledge base's scores for everyone (nDCG@10 on SciFact
fell 0.0149 with 60k memory rows) and one user's private text moved another's ranking. A search
reads the table of its owners (:func:`fts_tables`); every write goes to its owner's (:func:`index_chunk`).
Users still share ``memory_fts``'s statistics, so a memory search is not ranked by FTS5's ``bm25()``
but over its own scope's statistics (``bara.store.sqlite_scope_bm25``); the queries here answer it
only where that cannot (a query term FTS5 splits into a phrase).

A turn knows its lexical query before it has encoded it, and the encoding takes most of a search's
time. ``LexicalWorker`` runs the lexical arm on its own connection, in one background thread, while
the calling thread encodes; SQLite releases the GIL while it scores, so the two overlap. The result is
the same rows the search's own connection would return: the same SQL on the same committed data (WAL
lets a reader run beside the writer). Nothing is written through this connection: it is opened
``mode=ro``. An in-memory database cannot be shared between connections, so it gets no worker.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Iterator

from bara.store.base import LexicalPrefetch, lexical_key
from bara.store.sqlite_matrix import Matrix
from bara.text.lexical import index_text, match_expression
from bara.types import SHARED, SearchRequest

KB_FTS, MEMORY_FTS = "chunks_fts", "memory_fts"  # the shared rows' table, the users' rows' table


def fts_table(owner: str) -> str:
    """The full-text table that holds ``owner``'s rows."""
    return KB_FTS if owner == SHARED else MEMORY_FTS


def fts_tables(owners: Iterable[str]) -> tuple[str, ...]:
    """The tables a search of ``owners`` reads: one, unless it mixes the shared owner and users."""
    return tuple(sorted({fts_table(o) for o in owners}))


def lexical_sql(table: str) -> str:
    """The scoped BM25 query on ``table``. Ties in score go to the lower chunk id: a total order, so any
    limit's rows lead every longer ranking (SQLite already returned ties in rowid order; saying so makes
    it a contract, not an accident)."""
    return (f"SELECT rowid, bm25({table}, 1.0, ?, 0.0) AS s FROM {table} WHERE {table} MATCH ? "
            "ORDER BY s, rowid LIMIT ?")


#: The knowledge base's query (the in-memory lexicon agrees with it bit for bit).
LEXICAL_SQL = lexical_sql(KB_FTS)


def index_chunk(conn: sqlite3.Connection, chunk_id: int, owner: str, collection: str, body: str, heading: str) -> None:
    """Add one chunk's full-text row (rowid = chunk id) to its owner's table."""
    conn.execute(f"INSERT INTO {fts_table(owner)} (rowid, body, heading, scope) VALUES (?,?,?,?)",
                 (chunk_id, index_text(body), index_text(heading), scope_token(owner, collection)))


def unindex_document(conn: sqlite3.Connection, doc_id: int, owner: str) -> None:
    """Remove a document's full-text rows from its owner's table (before its chunks are deleted)."""
    conn.execute(f"DELETE FROM {fts_table(owner)} WHERE rowid IN (SELECT id FROM chunks WHERE doc_id=?)", (doc_id,))


Rows = list[tuple[int, float]]
Run = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


def runner(conn: sqlite3.Connection) -> Run:
    """``conn``'s query function: a statement's rows, fetched."""
    def run(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return conn.execute(sql, params).fetchall()
    return run


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """Every statement on ``conn`` inside reads the same snapshot of the database: one read transaction.

    Outside one, each statement is its own transaction, so a commit by another connection can fall
    between two of them; in WAL mode (every file store) writers go on meanwhile, and the snapshot ends
    when the block does."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.rollback()  # it only read


def lexical_arm(run: Run, req: SearchRequest, members: Container[int] | None) -> Rows:
    """``req``'s lexical rows via ``run`` (one connection's query). ``members``: the ids of the
    scope's chunks when the scope is the whole table; the arm then ranks without the scope test
    (twice the limit deep) and keeps the scope's rows, which are the scoped ranking's own leading rows,
    since both follow one total order. Should a write have slipped in between and they cannot fill
    the limit while more rows matched, it runs the scoped query after all.

    Without the scope test the ranking is the same: the scope column weighs 0 and holds no query term,
    so its phrase adds exactly 0.0 to each score, and every other factor (IDF, lengths) is table-wide
    either way; only the scope's posting list, long for a big knowledge base, is not read.

    A search that mixes the shared owner with users (only the library API can ask for one; the product
    searches the knowledge base and a user's memory apart) runs the scoped query on both tables and
    keeps the best ``limit`` rows by score, then chunk id. That is approximate: each table's scores come
    from its own statistics, so the two are not strictly comparable. (The store asks this only when
    ``sqlite_scope_bm25`` cannot score the users' part over its own scope, which merges the same way.)"""
    tables = fts_tables(req.owners)
    if len(tables) != 1:  # both tables (or none: no owner, no rows)
        rows = [row for table in tables for row in lexical_rows(run(lexical_sql(table), lexical_params(req)))]
        return sorted(rows, key=lambda row: (-row[1], row[0]))[:req.limit]
    sql = lexical_sql(tables[0])
    if members is None:
        return lexical_rows(run(sql, lexical_params(req)))
    wide = 2 * req.limit
    ranked = lexical_rows(run(sql, (req.title_weight, match_expression(req.terms), wide)))
    kept = [row for row in ranked if row[0] in members]
    if len(kept) >= req.limit or len(ranked) < wide:
        return kept[:req.limit]
    return lexical_rows(run(sql, lexical_params(req)))


def varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints (7 bits a byte, a 9th byte of 8), as FTS5 stores its sizes."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def averages(block: bytes | None) -> tuple[int, int]:
    """(rows, tokens of every column) from an FTS5 table's averages record (its ``_data`` row 1)."""
    sizes = varints(block or b"")
    return (sizes[0], sum(sizes[1:])) if sizes else (0, 0)


def scope_table_rows(run: Run, owners: Iterable[str]) -> int:
    """The rows of the full-text table a search of ``owners`` reads, from FTS5's averages record (one
    page, whatever the size); -1 when the search reads two tables (it is never "the whole table")."""
    tables = fts_tables(owners)
    if len(tables) != 1:
        return -1
    found = run(f"SELECT block FROM {tables[0]}_data WHERE id = 1", ())
    return averages(found[0][0])[0] if found else 0


def members(run: Run, m: Matrix, req: SearchRequest) -> Matrix | None:
    """The scope's chunk ids when the scope is still the whole of its full-text table as ``run``'s
    connection sees it (``skip_scope_test``): the lexical arm may then rank without its scope test.
    Else None. Users' rows live in their own table, so they never make a knowledge base stop being whole."""
    if not (req.skip_scope_test and m.whole):
        return None
    if scope_table_rows(run, req.owners) != len(m.ids):  # another scope has rows now: not checked again
        m.whole = False
        return None
    return m  # a Matrix answers ``in`` for the chunk ids it holds


@lru_cache(maxsize=4096)
def scope_token(owner: str, collection: str) -> str:
    """One full-text token naming an (owner, collection) scope; letters and digits only."""
    return "s" + hashlib.sha1(f"{owner}\x1f{collection}".encode()).hexdigest()[:24]


def lexical_params(req: SearchRequest) -> tuple[Any, ...]:
    """Parameters of :data:`LEXICAL_SQL` for ``req``: OR over the distinct terms, AND one of its scopes."""
    scopes = " OR ".join(f'"{scope_token(o, c)}"' for o in req.owners for c in req.collections)
    return (req.title_weight, f"({match_expression(req.terms)}) AND scope : ({scopes})", req.limit)


def lexical_rows(rows: list[tuple[Any, ...]]) -> list[tuple[int, float]]:
    """(chunk id, BM25 score) best first; FTS5 ranks by negated BM25, so the sign is flipped back."""
    return [(int(i), -float(s)) for i, s in rows]


class LexicalWorker:
    """One background thread with its own read-only connection to the store's file."""

    def __init__(self, location: str, uri: str | None = None):
        self.uri = uri or f"{Path(location).expanduser().resolve().as_uri()}?mode=ro"  # before any chdir
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._pid = os.getpid()

    def start(self, req: SearchRequest, arm: Callable[[Run], Rows] | None = None) -> LexicalPrefetch | None:
        """Queue the lexical arm of ``req``; None once closed. ``arm`` is given this connection's query
        function and returns ``req``'s rows as of this connection's view (default: FTS5's scoped query)."""
        with self._lock:
            if self._closed:
                return None
            if self._pid != os.getpid():  # a forked child has the pool but not its thread: start afresh
                self._pool, self._conn, self._pid = None, None, os.getpid()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bara-lexical")
            rows: Future[list[tuple[int, float]]] = self._pool.submit(self._run, req, arm)
        return LexicalPrefetch(lexical_key(req), rows, req.limit)

    def _run(self, req: SearchRequest, arm: Callable[[Run], Rows] | None) -> Rows:
        if self._conn is None:  # opened in the worker thread, used only there
            self._conn = sqlite3.connect(self.uri, uri=True, check_same_thread=False, timeout=30.0)
        run = runner(self._conn)
        with read_snapshot(self._conn):  # the scope's generations and its statistics as of one moment
            return arm(run) if arm is not None else lexical_arm(run, req, None)

    def close(self) -> None:
        """Finish queued work, stop the thread and close the connection (idempotent)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def collect(prefetched: LexicalPrefetch | None, req: SearchRequest) -> list[tuple[int, float]] | None:
    """The prefetched rows that answer ``req``: the leading ``req.limit`` of them (the ranking is a total
    order); None when they cannot (another key, a smaller limit) or when the worker failed (the caller
    then runs the arm on its own connection, which reports the error)."""
    if prefetched is None or prefetched.key != lexical_key(req) or prefetched.limit < req.limit:
        return None
    try:
        rows = prefetched.rows.result()
    except sqlite3.Error:
        return None
    return rows[:req.limit]
