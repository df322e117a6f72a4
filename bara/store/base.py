"""The Store seam: what every backend (SQLite now, PostgreSQL later) must provide.

Backends differ in how they run hybrid search (SQLite: two arm queries fused in
Python; PostgreSQL: one SQL round trip), so the protocol asks for the whole
hybrid search, not for separate arms. Everything is scoped by ``owner``: the
empty string :data:`bara.types.SHARED` is the shared knowledge base, any other
value is one user's private rows.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from bara.types import SHARED, Document, SearchRequest, StoredChunk, StoreSearchResult


@runtime_checkable
class SqlRunner(Protocol):
    """Parameterised SQL for domain tables (memory tiers, funds).

    Placeholders are ``?``; backends translate them. Values are always bound as
    parameters, never formatted into the SQL text.
    """

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def transaction(self) -> AbstractContextManager[None]:
        """All statements inside commit together or not at all (nests safely)."""
        ...


@runtime_checkable
class Store(SqlRunner, Protocol):
    """Documents, chunks, vectors and hybrid search, all owner-scoped."""

    location: str

    def document_hash(self, source: str, owner: str = SHARED, collection: str = "kb") -> str | None:
        """Content hash stored for ``source``, or None when it is not stored."""
        ...

    def list_sources(self, owner: str = SHARED, collection: str = "kb") -> list[str]: ...

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

    def scoped(self, owners: Sequence[str]) -> AbstractContextManager[None]:
        """Generic SQL run inside may only see rows of ``owners`` where the backend can enforce it
        (PostgreSQL: row-level security). SQLite has no such mechanism and relies on the WHERE
        clauses every query already carries; its ``scoped`` changes nothing."""
        ...

    def close(self) -> None: ...
