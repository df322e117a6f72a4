"""The Store seam: what every backend (SQLite now, PostgreSQL later) must provide.

Backends differ in how they run hybrid search (SQLite: two arm queries fused in
Python; PostgreSQL: one SQL round trip), so the protocol asks for the whole
hybrid search, not for separate arms. Everything is scoped by ``owner``: the
empty string :data:`bara.types.SHARED` is the shared knowledge base, any other
value is one user's private rows.
"""

from __future__ import annotations

from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from bara.types import SHARED, Document, SearchRequest, StoredChunk, StoreSearchResult

#: What a flat transaction (``transaction(flat=True)``) raises when a level inside it failed and the
#: caller caught the failure: with no savepoint to roll back to, none of the transaction is stored.
DOOMED = ("a level inside this flat transaction failed and it has no savepoint to roll back to, "
          "so nothing of the transaction was stored")


@runtime_checkable
class SqlRunner(Protocol):
    """Parameterised SQL for domain tables (memory tiers, funds).

    Placeholders are ``?``; backends translate them. Values are always bound as
    parameters, never formatted into the SQL text.
    """

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    def write(self, sql: str, params: Sequence[Any] = ()) -> None:
        """A write whose row count nobody reads. Inside a :meth:`transaction` PostgreSQL sends it with the
        transaction's next round trip (the next statement's pipeline, or the COMMIT's), so it costs none of
        its own; a failure is raised there and rolls the transaction back, as any failed write does.
        Outside a transaction, and on SQLite, it runs at once (:meth:`execute`)."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def query_many(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """Independent reads, each as :meth:`query` would answer it, in order, as of one moment (one
        transaction: on PostgreSQL one round trip for all). Inside :meth:`transaction` they run in it, one
        after another, so a write with ``RETURNING`` may be one of them (``Conversations.record_turn``)."""
        ...

    def transaction(self, flat: bool = False) -> AbstractContextManager[None]:
        """All statements inside commit together or not at all (nests safely).

        Each level nested inside rolls back alone on an exception (a savepoint), unless the outermost
        level is ``flat``: then the levels inside take no savepoint (fewer statements: on PostgreSQL a
        turn's dozen levels cost a SAVEPOINT and RELEASE each), and an exception leaving any of them
        dooms the whole transaction: it is rolled back, and if the caller caught that exception
        inside, the outermost level raises StoreError instead of committing. ``flat`` on a nested
        level changes nothing."""
        ...


@runtime_checkable
class Store(SqlRunner, Protocol):
    """Documents, chunks, vectors and hybrid search, all owner-scoped."""

    location: str

    def document_hash(self, source: str, owner: str = SHARED, collection: str = "kb") -> str | None:
        """Content hash stored for ``source``, or None when it is not stored."""
        ...

    def list_sources(self, owner: str = SHARED, collection: str = "kb", prefix: str = "") -> list[str]:
        """Sources of the scope that start with ``prefix`` (every one for ""), in ascending order; a prefix
        is read from the ``(owner, collection, source)`` index, not by listing the scope."""
        ...

    def write_document(self, doc: Document, vectors: np.ndarray) -> int:
        """Insert or replace ``doc`` and its chunks atomically; returns the document id."""
        ...

    def delete_document(self, source: str, owner: str = SHARED, collection: str = "kb") -> bool: ...

    def delete_owner(self, owner: str, collection: str | None = None) -> int:
        """Remove every document of ``owner`` (optionally one collection); returns the count."""
        ...

    def search(self, request: SearchRequest) -> StoreSearchResult: ...

    def get_chunks(self, ids: Sequence[int], owners: Sequence[str] | None = None) -> list[StoredChunk]:
        """Chunks by id, in the order given; ``owners`` restricts what may be returned."""
        ...

    def count_chunks(self, owner: str | None = None, collection: str | None = None) -> int: ...

    def has_chunks(self, owner: str, collection: str) -> bool:
        """Whether the scope holds any chunk: one index probe, whatever the scope's size (a turn asks
        it before searching a user's tier; ``count_chunks`` would count every row)."""
        ...

    def scoped(self, owners: Sequence[str]) -> AbstractContextManager[None]:
        """Generic SQL run inside may only see rows of ``owners`` where the backend can enforce it
        (PostgreSQL: row-level security). SQLite has no such mechanism and relies on the WHERE
        clauses every query already carries; its ``scoped`` changes nothing."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Read:
    """One read and what its rows mean: reads of several repositories sent together (:func:`read_all`, one
    :meth:`SqlRunner.query_many`: one round trip on PostgreSQL), as a turn's first reads are."""

    sql: str
    params: tuple[Any, ...]
    parse: Callable[[list[tuple[Any, ...]]], Any]


def read_all(runner: SqlRunner, reads: Mapping[str, Read]) -> dict[str, Any]:
    """Every read of ``reads`` in one :meth:`SqlRunner.query_many`, parsed, by the same keys."""
    if not reads:
        return {}
    return parsed(reads, runner.query_many(statements(reads)))


def statements(reads: Mapping[str, Read]) -> list[tuple[str, tuple[Any, ...]]]:
    """The ``(sql, params)`` of ``reads``, in order, for :meth:`SqlRunner.query_many`."""
    return [(r.sql, r.params) for r in reads.values()]


def parsed(reads: Mapping[str, Read], answers: Sequence[list[tuple[Any, ...]]]) -> dict[str, Any]:
    """``answers`` (one row list per read of ``reads``, in order) parsed by each read, by the same keys."""
    return {key: r.parse(rows) for (key, r), rows in zip(reads.items(), answers, strict=True)}


@dataclass(frozen=True)
class LexicalPrefetch:
    """The lexical arm of one search, started early on another connection: the turn starts
    it before it encodes the query, so the full-text scoring runs while the model does. ``key`` is what
    it searched (:func:`lexical_key`) and ``limit`` how many rows at most. The arm ranks by score, then
    chunk id, a total order, so a search with the same key and a smaller limit takes the leading rows;
    one with another key or a larger limit ignores the prefetch."""

    key: tuple[Any, ...]
    rows: "Future[list[tuple[int, float]]]"
    limit: int


def lexical_key(request: SearchRequest) -> tuple[Any, ...]:
    """Everything the lexical arm's ranking depends on: the distinct terms in order, the scopes and the
    title weight (the dense arm and the fusion weights play no part; the limit only cuts the ranking)."""
    return (tuple(dict.fromkeys(request.terms)), request.owners, request.collections, request.title_weight)


@runtime_checkable
class LexicalPrefetcher(Protocol):
    """A Store that can run the lexical arm ahead of the search (SQLite; PostgreSQL runs both arms in
    one round trip and has nothing to overlap)."""

    def prefetch_lexical(self, request: SearchRequest) -> LexicalPrefetch | None:
        """Start the lexical arm of ``request``; None when this store cannot (an in-memory database)."""
        ...

    def search_prefetched(self, request: SearchRequest, prefetched: LexicalPrefetch | None) -> StoreSearchResult:
        """As :meth:`Store.search`; the lexical arm is taken from ``prefetched`` when its key matches."""
        ...


# ---- NUL characters: PostgreSQL text cannot hold U+0000, SQLite can. Both stores drop it from every text they
# are given (SQL parameters and documents), so the same call stores the same value on either backend instead
# of working on one and failing on the other with a driver error (the service's ``storable`` does the same
# for request text).
def storable(value: Any) -> Any:
    """``value`` without NUL characters when it is text; anything else unchanged."""
    return value.replace("\x00", "") if isinstance(value, str) and "\x00" in value else value


def storable_params(params: Sequence[Any]) -> tuple[Any, ...]:
    """SQL parameters as :func:`storable` values."""
    return tuple(storable(v) for v in params)


def storable_document(doc: Document) -> Document:
    """``doc`` with its source, title and chunks' text, section and title :func:`storable`."""
    chunks = tuple(replace(c, text=storable(c.text), source=storable(c.source), section=storable(c.section),
                           title=storable(c.title)) for c in doc.chunks)
    return replace(doc, source=storable(doc.source), title=storable(doc.title), chunks=chunks)
