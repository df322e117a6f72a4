"""Store protocol over PostgreSQL + pgvector: psycopg 3, a connection pool, one round trip per search.

Every statement runs with the transaction-local setting ``bara.owners`` (row-level security, see
:mod:`bara.store.pg_sql`), sent in the same pipeline as the statement: outside a transaction the
pipeline is scope, statement, Sync (one implicit transaction), so a search is one network round trip. Store methods
scope themselves from their arguments; generic SQL (memory tiers, funds) runs in the scope of
:meth:`PostgresStore.scoped`, or ``*`` (all owners, WHERE clauses decide) when none is set.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, LiteralString, Sequence, cast

import numpy as np
import psycopg
from psycopg import sql as pgsql

from bara.errors import StoreError, StoreUnavailableError
from bara.store.pg_faults import quiet_rollback, translated
from bara.store import pg_lexical, pg_rows, pg_sql
from bara.store.pg_admin import connect_error, migrate, use_schema, vector_dim
from bara.store.base import DOOMED, storable_document, storable_params
from bara.types import SHARED, Document, SearchRequest, StoredChunk, StoreSearchResult

ALL_OWNERS = "*"
pg_sql.cache_hybrid_parse()  # else psycopg re-parses the ~5 kB search statement on every call
_SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("bara_pg_scope", default=ALL_OWNERS)


def _scope(owners: Sequence[str] | None) -> str:
    return ALL_OWNERS if owners is None else json.dumps(list(owners))


def _write_scope(owner: str) -> str:
    """The scope a store write of ``owner``'s rows runs in.

    Shared rows (the knowledge base): whatever scope the caller is in, so maintenance (unscoped, ``*``)
    may write them and a user's turn (``["", user]``) may not: the database's write policy refuses
    shared rows in any listed scope. A user's rows: the caller's scope when it lists that user (a
    turn's ``["", user]``: the policy lets a listed scope write only rows of its non-shared owners, so
    the write may touch exactly what it could in ``[user]``, and the turn's statements need no scope
    change between them), else that user alone.
    """
    current = _SCOPE.get()
    if owner == SHARED:
        return current
    if current != ALL_OWNERS and owner in json.loads(current):
        return current
    return _scope([owner])


class PostgresStore:
    """Store protocol over one PostgreSQL database (optionally one schema of it)."""

    def __init__(self, url: str, *, dim: int = 384, schema: str = "", admin_url: str = "",
                 app_role: str = "", pool_size: int = 8, ef_search: int = 100, pool_timeout_s: float = 30.0,
                 lexical_rank: str = "ts_rank_log", private_exact_max: int = 2000,
                 lexical_bounded_min_rows: int = 20_000, lexical_candidates: int = 5000,
                 lexical_terms_min_rows: int = 1000):
        from psycopg_pool import ConnectionPool

        if lexical_rank not in pg_sql.LEXICAL_RANKS:
            raise StoreError(f"pg_lexical_rank must be one of {', '.join(pg_sql.LEXICAL_RANKS)}, not {lexical_rank!r}")
        self.location, self.schema, self.ef_search = url, schema, ef_search
        self._hybrid, self.private_exact_max = pg_sql.hybrid(lexical_rank), private_exact_max
        self.lexical_bounded_min_rows, self.lexical_candidates = lexical_bounded_min_rows, lexical_candidates
        self.lexical_terms_min_rows = lexical_terms_min_rows
        self._local = threading.local()
        migrate(admin_url or url, dim=dim, schema=schema, app_role=app_role)
        self.dim = self._probe(url)
        # a request waits at most pg_pool_timeout_s for a connection (then a store fault, bara.store.pg_faults)
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, kwargs={"autocommit": True},
                                    configure=self._configure, open=True, name="bara", timeout=pool_timeout_s)
        self._url = url

    def _reachable(self) -> bool:
        try:
            psycopg.connect(self._url, autocommit=True, connect_timeout=2).close()
            return True
        except psycopg.Error:
            return False

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection, with any fault of getting or using it as a typed store fault."""
        try:
            with translated(self._reachable), self._pool.connection() as conn:
                yield conn
        except StoreUnavailableError:
            self._pool.check()  # drop the idle connections a stopped server broke, so service resumes by itself
            raise

    def _configure(self, conn: psycopg.Connection) -> None:
        from pgvector.psycopg import register_vector

        if self.schema:
            conn.execute(pgsql.SQL("SET search_path TO {}, public").format(pgsql.Identifier(self.schema)))
        # read by the chunk_terms trigger: which scopes keep per-term counts (bara.store.pg_lexical, 0032)
        conn.execute(pg_lexical.SET_MIN_ROWS, (str(self.lexical_terms_min_rows),))
        register_vector(conn)

    def _probe(self, url: str) -> int:
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
                if self.schema:
                    use_schema(conn, url, self.schema)  # refuses a missing schema once, not per pooled connection
                self._configure(conn)
                return vector_dim(conn, url)
        except psycopg.OperationalError as exc:
            raise connect_error(url, exc) from exc

    # ----------------------------------------------------------------- SQL runner
    @contextmanager
    def scoped(self, owners: Sequence[str]) -> Iterator[None]:
        """Generic SQL inside sees only rows of ``owners`` (row-level security), whatever its WHERE."""
        token = _SCOPE.set(_scope(owners))
        try:
            yield
        finally:
            _SCOPE.reset(token)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._run(pg_sql.to_pyformat(sql), storable_params(params), _SCOPE.get(), fetch=False)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """All rows or none: a transaction of its own, or inside the caller's like one statement (no savepoint
        level of its own: a failure aborts the caller's level, as a failing :meth:`execute` does)."""
        if getattr(self._local, "depth", 0):
            self._send(*self._in_scope((pg_sql.SET_SCOPE, (_SCOPE.get(),))),
                       many=(pg_sql.to_pyformat(sql), [storable_params(r) for r in rows]))
            return
        with self.transaction():
            self.executemany(sql, rows)

    def write(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Inside a transaction: queued, in its scope, for the transaction's next pipeline (see ``pending``)."""
        local = self._local
        if not getattr(local, "depth", 0):
            self.execute(sql, params)
            return
        local.pending.extend(self._in_scope((pg_sql.SET_SCOPE, (_SCOPE.get(),))))
        local.pending.append((pg_sql.to_pyformat(sql), storable_params(params)))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._run(pg_sql.to_pyformat(sql), storable_params(params), _SCOPE.get(), fetch=True)

    def query_many(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """Every statement in one pipeline behind one scope: one round trip, one (implicit) transaction."""
        if not statements:
            return []
        queries = [(pg_sql.to_pyformat(sql), storable_params(params)) for sql, params in statements]
        setup = (pg_sql.SET_SCOPE, (_SCOPE.get(),))
        if getattr(self._local, "conn", None) is not None:
            cursors = self._pipeline((*self._in_scope(setup), *queries))[-len(queries):]
            return [cur.fetchall() for cur in cursors]
        with self._connection() as conn:
            with conn.pipeline():
                conn.execute(*setup)
                cursors = [conn.execute(cast(LiteralString, sql), params) for sql, params in queries]
            return [cur.fetchall() for cur in cursors]

    def _run(self, sql: str, params: Any, scope: str, fetch: bool, setup: tuple | None = None) -> Any:
        setup = setup or (pg_sql.SET_SCOPE, (scope,))
        if getattr(self._local, "conn", None) is not None:
            cur = self._send(*self._in_scope(setup), (sql, params))
            return cur.fetchall() if fetch else cur.rowcount
        with self._connection() as conn:
            # No BEGIN/COMMIT: what one pipeline sends before its Sync is one implicit transaction, so the
            # transaction-local scope holds for the statement, the Sync commits both, and a failure rolls back both.
            with conn.pipeline():
                conn.execute(*setup)
                cur = conn.execute(cast(LiteralString, sql), params)  # bara's SQL text; values go in params
            return cur.fetchall() if fetch else cur.rowcount

    # A transaction's BEGIN, SAVEPOINT and RELEASE wait in the thread's ``pending`` list and go out in the
    # pipeline of its next statement (or with the COMMIT), so a nested write costs no round trips of its
    # own, and a level whose block ran no statement sends nothing (a turn nests a dozen such levels: under
    # load each round trip is a wait for the server process to be scheduled, docs/benchmarks.md).
    # ``sent`` counts the pipelines sent in the transaction: a level is on the server once it changed.
    # :meth:`write` queues its statement (a (sql, params) pair, after its scope) there too, in order.
    @contextmanager
    def transaction(self, flat: bool = False) -> Iterator[None]:
        """BEGIN on a pooled connection at the outermost level (per thread), savepoints inside (none
        inside a ``flat`` one, see :meth:`bara.store.base.SqlRunner.transaction`); any exception
        (KeyboardInterrupt included) rolls back to where the level began."""
        depth = getattr(self._local, "depth", 0)
        if depth:
            yield from (self._flat_level(depth) if self._local.flat else self._savepoint(depth))
            return
        with self._connection() as conn:
            self._local.conn, self._local.depth, self._local.pending, self._local.sent = conn, 1, ["BEGIN"], 0
            self._local.scope, self._local.flat, self._local.doomed = None, flat, False
            try:
                yield
            except BaseException:
                if self._local.sent:
                    quiet_rollback(conn)
                raise
            else:
                if self._local.sent or _writes(self._local.pending) or self._local.doomed:
                    self._commit(conn)
            finally:
                self._local.conn, self._local.depth, self._local.pending = None, 0, []

    def _commit(self, conn: psycopg.Connection) -> None:
        """COMMIT, in one pipeline with what is pending (queued writes: the turn's trace). A transaction a
        failure aborted is never reported committed: PostgreSQL answers its COMMIT with a silent ROLLBACK."""
        if self._local.doomed:
            if self._local.sent:
                quiet_rollback(conn)
            raise StoreError(DOOMED)
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            quiet_rollback(conn)
            raise StoreError("a statement of this transaction failed, so nothing of it was stored")
        try:
            self._send(("COMMIT", None))
        except BaseException:  # a queued write failed: the pipeline skipped the COMMIT
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                quiet_rollback(conn)
            raise

    def _savepoint(self, depth: int) -> Iterator[None]:
        local, name = self._local, f"sp{depth}"
        mark, sent = len(local.pending), local.sent
        local.pending.append(f"SAVEPOINT {name}")
        local.depth = depth + 1
        try:
            yield
        except BaseException:
            if local.sent == sent:  # nothing of this level reached the server: forget its SAVEPOINT
                if _writes(local.pending[mark:]):
                    local.scope = None  # a scope queued with the writes is forgotten too
                del local.pending[mark:]
            else:  # what is still pending are RELEASEs of inner levels, which the rollback undoes anyway
                local.pending.clear()
                local.scope = None  # the rollback undoes a scope set inside
                try:
                    local.conn.execute(pgsql.SQL("ROLLBACK TO SAVEPOINT {}").format(pgsql.Identifier(name)))
                except psycopg.Error:  # its SAVEPOINT never ran (a write queued before it failed): the
                    pass  # transaction stays aborted, the error raised is the level's, and _commit refuses
            raise
        finally:
            local.depth = depth
        if local.sent == sent and not _writes(local.pending[mark:]):
            del local.pending[mark:]
        else:  # on the server, or it will be with its queued writes
            local.pending.append(f"RELEASE SAVEPOINT {name}")

    def _flat_level(self, depth: int) -> Iterator[None]:
        """A level inside a flat transaction: no savepoint; a failure through it dooms the transaction."""
        self._local.depth = depth + 1
        try:
            yield
        except BaseException:
            self._local.doomed = True
            raise
        finally:
            self._local.depth = depth

    def _in_scope(self, setup: tuple) -> tuple[tuple[Any, Any], ...]:
        """``setup``, unless it sets the scope the transaction is in already (set_config(..., true)
        holds to the end of the transaction; a rolled-back savepoint forgets it)."""
        if setup[0] is not pg_sql.SET_SCOPE:
            self._local.scope = None
            return (setup,)
        if self._local.scope == setup[1][0]:
            return ()
        self._local.scope = setup[1][0]
        return (setup,)

    def _send_pending(self, conn: psycopg.Connection) -> None:
        """What waits for the next statement: transaction control (BEGIN, SAVEPOINT...) and queued writes."""
        pending = self._local.pending
        for item in pending:
            if isinstance(item, str):
                conn.execute(cast(LiteralString, item))
            else:
                conn.execute(cast(LiteralString, item[0]), item[1])
        pending.clear()

    def _send(self, *statements: tuple[Any, Any], many: tuple[str, list[Any]] | None = None) -> Any:
        """:meth:`_pipeline`: the cursor of the last of ``statements`` (None without any)."""
        cursors = self._pipeline(statements, many)
        return cursors[-1] if cursors else None

    def _pipeline(self, statements: Sequence[tuple[Any, Any]], many: tuple[str, list[Any]] | None = None) -> list[Any]:
        """The pending transaction control, then ``statements``, then ``many`` (one statement over many
        rows: psycopg pipelines them too), in one pipeline of the thread's transaction: a cursor per statement."""
        conn, cursors = self._local.conn, []
        self._local.sent += 1
        with conn.pipeline():
            self._send_pending(conn)
            for sql, params in statements:
                cursors.append(conn.execute(cast(LiteralString, sql), params))
            if many is not None:
                with conn.cursor() as rows_cur:
                    rows_cur.executemany(cast(LiteralString, many[0]), many[1])
        return cursors

    # ------------------------------------------------------------------ documents
    def document_hash(self, source: str, owner: str = SHARED, collection: str = "kb") -> str | None:
        rows = self._run("SELECT content_hash FROM documents WHERE owner=%s AND collection=%s AND source=%s",
                         (owner, collection, source), _scope([owner]), fetch=True)
        return rows[0][0] if rows else None

    def list_sources(self, owner: str = SHARED, collection: str = "kb", prefix: str = "") -> list[str]:
        # starts_with, not a range: the index orders by the database's collation, which may not be bytewise;
        # the scope's index entries are filtered in the server, none sent that does not match
        sql, params = "SELECT source FROM documents WHERE owner=%s AND collection=%s", [owner, collection]
        if prefix:
            sql, params = sql + " AND starts_with(source, %s)", params + [prefix]
        rows = self._run(sql + " ORDER BY source", tuple(params), _scope([owner]), fetch=True)
        return [r[0] for r in rows]

    def write_document(self, doc: Document, vectors: np.ndarray) -> int:
        if len(doc.chunks) != len(vectors):
            raise ValueError(f"{len(doc.chunks)} chunks but {len(vectors)} vectors for {doc.source}")
        vecs, doc = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(doc.chunks), -1), storable_document(doc)
        if len(vecs) and vecs.shape[1] != self.dim:
            raise StoreError(f"{self.location} stores {self.dim}-dimensional embeddings but the embedder gave "
                             f"{vecs.shape[1]}: use the embedder the store was built with, or a new database")
        scope = (pg_sql.SET_SCOPE, (_write_scope(doc.owner),))
        rows = [pg_rows.chunk_row(doc, c, v) for c, v in zip(doc.chunks, vecs, strict=False)]
        with self.transaction():  # one round trip: the document, its id and its chunks in one pipeline
            cur = self._send(*self._in_scope(scope), (pg_sql.DELETE_DOCUMENT, (
                doc.owner, doc.collection, doc.source)), (pg_sql.INSERT_DOCUMENT, (
                    doc.owner, doc.collection, doc.source, doc.title, doc.content_hash, json.dumps(dict(doc.meta)),
                    time.time())), many=(pg_sql.INSERT_CHUNK, rows) if rows else None)
            doc_id = cast(tuple, cur.fetchone())[0]  # INSERT ... RETURNING id: one row
        return int(doc_id)

    def delete_document(self, source: str, owner: str = SHARED, collection: str = "kb") -> bool:
        with self.transaction():
            cur = self._send(*self._in_scope((pg_sql.SET_SCOPE, (_write_scope(owner),))),
                             (pg_sql.DELETE_DOCUMENT, (owner, collection, source)))
            return cur.rowcount > 0

    def delete_owner(self, owner: str, collection: str | None = None) -> int:
        sql, params = "DELETE FROM documents WHERE owner=%s", [owner]
        if collection is not None:
            sql, params = sql + " AND collection=%s", params + [collection]
        return self._run(sql, params, _write_scope(owner), fetch=False)

    # --------------------------------------------------------------------- search
    def search(self, request: SearchRequest) -> StoreSearchResult:
        t0 = time.perf_counter()
        setup = (pg_sql.SET_SEARCH, (_scope(request.owners), str(max(self.ef_search, request.limit)),
                                     str(max(20000, 50 * request.limit))))
        params = pg_rows.search_params(request, self.private_exact_max, self.lexical_bounded_min_rows, self.lexical_candidates)
        rows = self._run(self._hybrid, params, "", fetch=True, setup=setup)
        ms = (time.perf_counter() - t0) * 1e3
        n_lex, n_den = (int(rows[0][7]), int(rows[0][8])) if rows else (0, 0)
        return StoreSearchResult(tuple(pg_rows.candidate(r) for r in rows), n_lex, n_den, {"hybrid_sql": ms})

    # ---------------------------------------------------------------------- reads
    def get_chunks(self, ids: Sequence[int], owners: Sequence[str] | None = None) -> list[StoredChunk]:
        if not ids:
            return []
        sql, params = pg_sql.GET_CHUNKS, [[int(i) for i in ids]]
        if owners is not None:
            sql, params = sql + " AND c.owner = ANY (%s::text[])", params + [list(owners)]
        by_id = {r[0]: pg_rows.stored(r) for r in self._run(sql, params, _scope(owners), fetch=True)}
        return [by_id[i] for i in ids if i in by_id]

    def count_chunks(self, owner: str | None = None, collection: str | None = None) -> int:
        sql, params = "SELECT COUNT(*) FROM chunks WHERE true", []
        if owner is not None:
            sql, params = sql + " AND owner=%s", params + [owner]
        if collection is not None:
            sql, params = sql + " AND collection=%s", params + [collection]
        return int(self._run(sql, params, _scope(None if owner is None else [owner]), fetch=True)[0][0])

    def has_chunks(self, owner: str, collection: str) -> bool:
        return bool(self._run("SELECT EXISTS (SELECT 1 FROM chunks WHERE owner=%s AND collection=%s)",
                              [owner, collection], _scope([owner]), fetch=True)[0][0])

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> "PostgresStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _writes(pending: Sequence[Any]) -> bool:
    """Whether ``pending`` holds a queued write (a (sql, params) pair; control statements are text)."""
    return any(not isinstance(item, str) for item in pending)
