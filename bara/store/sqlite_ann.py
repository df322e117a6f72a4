"""Approximate dense search for the SQLite store's large scopes.

Below ``Settings.store_ann_min_chunks`` a scope's dense arm stays exact numpy over its cached float32
matrix (``bara.store.sqlite_matrix``): the default evaluations (SciFact, the RFCs, MTRAG) never reach
it. A scope at or above it (a team's knowledge base of 10^5-10^6 chunks) is searched through an HNSW
graph (Malkov & Yashunin, "Efficient and robust approximate nearest neighbor search using Hierarchical
Navigable Small World graphs", 2018) held by usearch, chosen on measured speed, recall, memory and
persistence (docs/scaling.md): its vectors are quantised (``store_ann_dtype``, int8 by default: 384
bytes a chunk instead of 1,536), so 10^6 chunks need ~0.6 GB rather than the 1.5 GB of float32.

What the graph returns is only a candidate list: ``oversample`` x the arm's limit ids, whose float32
vectors are then read from the ``chunks`` table by primary key *with the request's owner and collection
test* and scored exactly. So a hit's similarity is always the stored vector's (never a quantised or stale
copy), a chunk deleted since the graph was synchronised is simply not found, and a chunk of another
owner or collection can never be returned even if a graph held it. The dense ranking of the candidates
is the exact path's order (score, then id).

The graph belongs to one search scope ``(owners, collections)`` and is labelled with the scope's write
generations (``scope_generation``) read *before* its rows: a search whose generations differ first
synchronises it. Synchronising compares (chunk id, content hash) pairs with the graph's: rows gone or
changed are removed, rows new or changed are added (SQLite may reuse the id of a deleted last row, which
the content hash catches; a chunk's vector is its text's embedding under the store's one embedder). When
removals reach ``REBUILD_FRACTION`` of the graph it is rebuilt instead (HNSW degrades with tombstones).

The graph persists beside the SQLite file (``<db>.ann/<scope hash>.usearch`` with the ids, hashes and
generations in ``.npz``): a restarted process maps it (``Index.view``) instead of rebuilding it (minutes at
10^6 rows) or reading it whole (508 MiB at 10^6: ~35 s from this machine's disk when it is not in the page
cache, which made a cold ``bara serve`` start miss its 30 s). A mapped graph reads only the pages its
searches touch, and it cannot change: before the first synchronisation that adds or removes rows it is
loaded whole from its file, with the labels saved beside it (another process may have replaced both since).
Saving is best effort (a read-only folder keeps the graph in memory only).
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bara.settings import Settings
from bara.store.sqlite_matrix import Matrix
from bara.store.sqlite_sql import marks
from bara.types import SHARED

Run = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
Key = tuple[tuple[str, ...], tuple[str, ...]]

#: Removed rows (tombstones) beyond this share of the graph rebuild it rather than patch it.
REBUILD_FRACTION = 0.2
#: Rows read and added per step while building (bounds the float32 staging buffer: ~15 MB at 384 dims).
BUILD_BATCH = 10_000


@dataclass(frozen=True)
class AnnConfig:
    """The ANN bounds from ``Settings`` (``store_ann_*``); ``min_chunks`` 0 turns the graph off."""

    min_chunks: int
    min_user_chunks: int = 20_000
    dtype: str = "i8"
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 2048
    oversample: float = 2.0

    @classmethod
    def from_settings(cls, s: Settings) -> "AnnConfig":
        return cls(s.store_ann_min_chunks, s.store_ann_min_user_chunks, s.store_ann_dtype, s.store_ann_connectivity, s.store_ann_expansion_add,
                   s.store_ann_expansion_search, s.store_ann_oversample)

    def candidates(self, limit: int) -> int:
        return max(limit, int(np.ceil(limit * self.oversample)))


#: A bare ``SQLiteStore`` gets the defaults of ``Settings``.
DEFAULT = AnnConfig.from_settings(Settings())


def content_keys(hashes: Sequence[str]) -> np.ndarray:
    """The first 64 bits of each chunk's content hash (hex), as int64: a changed text changes it."""
    return np.fromiter((int(h[:16], 16) - (1 << 63) if h else 0 for h in hashes), dtype=np.int64, count=len(hashes))


def scope_rows(run: Run, key: Key) -> tuple[np.ndarray, np.ndarray]:
    """(ids ascending, content keys) of the scope's chunks."""
    owners, colls = key
    rows = run(f"SELECT id, content_hash FROM chunks WHERE owner IN ({marks(owners)})"
               f" AND collection IN ({marks(colls)}) ORDER BY id", (*owners, *colls))
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return ids, content_keys([r[1] or "" for r in rows])


def vectors_of(run: Run, key: Key, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids found, float32 vectors) of ``ids`` that are still in the scope, by primary key; the owner and
    collection test is written ``+`` so SQLite looks ids up rather than walking the owner index."""
    owners, colls = key
    found_ids, blobs = [], []
    for start in range(0, len(ids), 500):  # SQLite's default bound on host parameters is 32,766; stay small
        part = [int(i) for i in ids[start:start + 500]]
        for cid, blob in run(f"SELECT id, embedding FROM chunks WHERE id IN ({marks(part)})"
                             f" AND +owner IN ({marks(owners)}) AND +collection IN ({marks(colls)})",
                             (*part, *owners, *colls)):
            found_ids.append(cid)
            blobs.append(blob)
    if not blobs:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    return (np.asarray(found_ids, dtype=np.int64),
            np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1))


def scope_count(run: Run, key: Key) -> int:
    owners, colls = key
    return int(run(f"SELECT COUNT(*) FROM chunks WHERE owner IN ({marks(owners)}) AND collection IN ({marks(colls)})",
                   (*owners, *colls))[0][0])


def changes(held_ids: np.ndarray, held_keys: np.ndarray, ids: np.ndarray,
            keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids to remove, ids to add) taking a graph holding ``held_*`` to the rows ``ids`` / ``keys`` (both
    ascending): rows gone, rows new, and rows whose content changed under the same id (removed and added)."""
    _, at_held, at_now = np.intersect1d(held_ids, ids, assume_unique=True, return_indices=True)
    changed = held_ids[at_held[held_keys[at_held] != keys[at_now]]]
    gone = np.union1d(np.setdiff1d(held_ids, ids, assume_unique=True), changed)
    new = np.union1d(np.setdiff1d(ids, held_ids, assume_unique=True), changed)
    return gone, new


class ScopeGraph:
    """One scope's HNSW graph, the (id, content key) pairs it holds (ids ascending) and its generations."""

    def __init__(self, config: AnnConfig, dim: int, graph: Any = None):
        self.config, self.dim = config, dim
        self.graph = graph if graph is not None else new_graph(config, dim)
        self.ids = np.zeros(0, dtype=np.int64)
        self.keys = np.zeros(0, dtype=np.int64)
        self.gens: tuple[int, ...] = ()
        self.removed = 0  # tombstones since the last build
        self.viewed = False  # memory-mapped from its file (Graphs._load): searchable, never changed

    @property
    def nbytes(self) -> int:
        return int(self.graph.memory_usage) + self.ids.nbytes + self.keys.nbytes

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if len(ids):
            self.graph.add(ids.astype(np.uint64), vectors, threads=0)

    def remove(self, ids: np.ndarray) -> None:
        if len(ids):
            self.graph.remove(ids.astype(np.uint64))
            self.removed += len(ids)

    def search(self, vector: np.ndarray, count: int) -> np.ndarray:
        """Up to ``count`` candidate ids nearest to ``vector`` (approximately), int64."""
        if len(self.graph) == 0 or count <= 0:  # an empty graph, or only the lexical hits' similarities wanted
            return np.zeros(0, dtype=np.int64)
        self.graph.expansion_search = max(self.config.expansion_search, count)
        found = self.graph.search(np.asarray(vector, dtype=np.float32), count)
        return np.asarray(found.keys, dtype=np.int64)


def new_graph(config: AnnConfig, dim: int) -> Any:
    load_usearch()
    from usearch.index import Index

    # inner product of unit vectors (cosine measured no better: recall@10 0.92 against 0.94 on the 10^5 store)
    return Index(ndim=dim, metric="ip", dtype=config.dtype, connectivity=config.connectivity,
                 expansion_add=config.expansion_add, expansion_search=config.expansion_search)


def load_usearch() -> None:
    """Import usearch on first use (a store that never reaches a threshold never loads it), *after*
    onnxruntime: importing onnxruntime once usearch's numkong kernels are loaded segfaults in libstdc++
    (seen twice in ``bench_scale.py``: a graph search, then the embedder's first encoding), while the
    other order works (``bara serve`` warms the embedder first). onnxruntime is a runtime dependency."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        pass


def folder(location: str) -> Path | None:
    """Where a store's graphs persist: ``<db>.ann`` beside the file (none for ``:memory:``)."""
    return None if location == ":memory:" else Path(f"{location}.ann")


def graph_name(key: Key, config: AnnConfig) -> str:
    spec = f"{key!r}|{config.dtype}|{config.connectivity}|{config.expansion_add}"
    return hashlib.sha1(spec.encode()).hexdigest()[:20]


class Graphs:
    """The store's scope graphs by key, synchronised to the generations a search read, under one lock
    (a search reads the graph while no synchronisation changes it)."""

    def __init__(self, location: str, config: AnnConfig = DEFAULT):
        self.config, self.root = config, folder(location)
        self._graphs: dict[Key, ScopeGraph] = {}
        self.lock = threading.RLock()

    def eligible(self, run: Run, key: Key) -> bool:
        """Whether the scope is searched through a graph: its threshold is on (``min_chunks`` for a scope with
        the shared knowledge base, ``min_user_chunks`` for users' memory alone) and it is at least that big."""
        least = self.config.min_chunks if SHARED in key[0] else self.config.min_user_chunks
        return least > 0 and scope_count(run, key) >= least

    def held(self, key: Key) -> ScopeGraph | None:
        return self._graphs.get(key)

    def current(self, run: Run, key: Key, gens: tuple[int, ...], dim: int) -> ScopeGraph:
        """The scope's graph as of ``gens``: mapped from its file, built, or synchronised (call under ``lock``)."""
        graph = self._graphs.get(key)
        if graph is None or graph.dim != dim:
            graph = self._load(key, dim, view=True) or ScopeGraph(self.config, dim)
            self._graphs[key] = graph
        if graph.gens != gens:
            if graph.viewed:  # a mapped graph cannot change (usearch refuses an add, and crashes on a remove)
                graph = self._load(key, dim, view=False) or ScopeGraph(self.config, dim)
                self._graphs[key] = graph
        if graph.gens != gens:  # (the file read whole may be as of ``gens``: another process saved it)
            self._sync(run, key, gens, graph)
        return graph

    def _sync(self, run: Run, key: Key, gens: tuple[int, ...], graph: ScopeGraph) -> None:
        ids, keys = scope_rows(run, key)  # read after ``gens``: the graph is at least as new as its label
        gone, new = changes(graph.ids, graph.keys, ids, keys)
        if len(graph.ids) and graph.removed + len(gone) > REBUILD_FRACTION * max(len(ids), 1):
            graph.graph, graph.removed = new_graph(self.config, graph.dim), 0
            gone, new = np.zeros(0, dtype=np.int64), ids
        graph.remove(gone)
        for start in range(0, len(new), BUILD_BATCH):
            found, vectors = vectors_of(run, key, new[start:start + BUILD_BATCH])
            if len(found) and vectors.shape[1] == graph.dim:
                graph.add(found, vectors)
        graph.ids, graph.keys, graph.gens = ids, keys, gens
        if len(gone) or len(new):
            self._save(key, graph)

    def _paths(self, key: Key) -> tuple[Path, Path] | None:
        if self.root is None:
            return None
        name = graph_name(key, self.config)
        return self.root / f"{name}.usearch", self.root / f"{name}.npz"

    def _save(self, key: Key, graph: ScopeGraph) -> None:
        paths = self._paths(key)
        if paths is None:
            return
        try:
            self.root.mkdir(exist_ok=True)  # type: ignore[union-attr]
            tmp_graph, tmp_meta = paths[0].with_suffix(".tmp.usearch"), paths[1].with_suffix(".tmp.npz")
            graph.graph.save(str(tmp_graph))
            np.savez(tmp_meta, ids=graph.ids, keys=graph.keys, gens=np.asarray(graph.gens, dtype=np.int64),
                     removed=np.asarray([graph.removed, graph.dim]))
            os.replace(tmp_graph, paths[0])
            os.replace(tmp_meta, paths[1])  # the labels last: a crash between leaves old labels, re-synchronised
        except OSError:
            return  # best effort: the graph stays in memory and is synchronised as before

    def _load(self, key: Key, dim: int, view: bool) -> ScopeGraph | None:
        """The saved graph and its labels, memory-mapped (``view``) or read whole; None when there is none
        usable (missing, damaged, another dimension, or a graph and labels that disagree)."""
        paths = self._paths(key)
        if paths is None or not (paths[0].exists() and paths[1].exists()):
            return None
        try:
            with np.load(paths[1]) as meta:
                removed, stored_dim = (int(x) for x in meta["removed"])
                if stored_dim != dim:
                    return None
                graph = ScopeGraph(self.config, dim)
                (graph.graph.view if view else graph.graph.load)(str(paths[0]))
                graph.viewed = view
                graph.ids, graph.keys = meta["ids"], meta["keys"]
                graph.gens, graph.removed = tuple(int(g) for g in meta["gens"]), removed
        except (OSError, ValueError, KeyError, RuntimeError):
            return None  # damaged or foreign: rebuilt from the table
        if len(graph.graph) != len(graph.ids):
            return None  # the graph and its labels disagree (a crash between the two writes): rebuild
        return graph


def approximate_dense(run: Run, graphs: Graphs, key: Key, gens: tuple[int, ...], vector: np.ndarray, limit: int,
                      also: Sequence[int]) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """The dense arm through the scope's graph: the best ``limit`` of its candidates by exact float32 score
    (score, then id), and the exact similarity of every candidate and of ``also`` (the lexical arm's ids,
    for fusion's similarity floor)."""
    q = np.asarray(vector, dtype=np.float32)
    with graphs.lock:
        graph = graphs.current(run, key, gens, len(q))
        candidates = graph.search(q, graphs.config.candidates(limit))
    wanted = np.union1d(candidates, np.asarray(list(also), dtype=np.int64))
    ids, vectors = vectors_of(run, key, wanted)
    if len(ids) == 0 or vectors.shape[1] != len(q):
        return [], {}
    sims = vectors @ q
    sim = dict(zip(ids.tolist(), sims.tolist(), strict=True))
    pool = np.isin(ids, candidates)
    cand_ids, cand_sims = ids[pool], sims[pool]
    order = np.lexsort((cand_ids, -cand_sims))[:limit]
    return [(int(cand_ids[i]), float(cand_sims[i])) for i in order], sim


def approximate_matrix(run: Run, key: Key, gens: tuple[int, ...]) -> Matrix:
    """A graph scope's cached :class:`Matrix`: its chunk ids (for the lexical arm's scope test and counts),
    no vectors (they are in the graph, and read exactly from the table for the candidates)."""
    owners, colls = key
    rows = run(f"SELECT id FROM chunks WHERE owner IN ({marks(owners)}) AND collection IN ({marks(colls)})"
               " ORDER BY id", (*owners, *colls))
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return Matrix(gens, ids, np.zeros((len(ids), 0), dtype=np.float32), approximate=True)
