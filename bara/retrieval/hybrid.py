"""Hybrid retrieval: lexical + dense arms, weighted RRF, similarity floor, optional rerank.

The Store runs both arms and fuses them (see ``Store.search``); this module owns
the policy around it: query sanitising, the fallback when the lexical arm finds
nothing, the floor, reranking, and the typed outcome with its reasons.
"""

from __future__ import annotations

import numbers
import re
import time
from functools import lru_cache
from enum import Enum
from typing import Sequence

import numpy as np

from bara.errors import InputError
from bara.retrieval.protocol import Embedder
from bara.retrieval.rerank import PassthroughReranker, Reranker
from bara.settings import Settings
from bara.store.base import LexicalPrefetch, LexicalPrefetcher, Store
from bara.text.lexical import analyze
from bara.text.surrogates import no_surrogates
from bara.types import SHARED, Candidate, Hit, RetrievalOutcome, SearchRequest, Status, StoreSearchResult

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class Arms(str, Enum):
    """Which retrieval arms a search runs (the eval compares them)."""

    LEXICAL = "bm25"
    DENSE = "dense"
    HYBRID = "hybrid"


def clean_query(text: str, max_chars: int) -> tuple[str, tuple[str, ...]]:
    """Strip control characters, replace undecodable bytes, cap the length; returns the query and reason codes."""
    cleaned = no_surrogates(_CONTROL.sub(" ", text)).strip()  # undecodable input: cannot be stored or embedded
    if len(cleaned) > max_chars:
        return cleaned[:max_chars], ("query_truncated",)
    return cleaned, ()


def search_limits(k: object, floor: object, settings: Settings) -> tuple[int, float]:
    """``k`` and ``floor`` of one search (None: the settings' defaults). A k below 1 (which sliced the
    hits from the end) or not a whole number, and a floor that is not a cosine similarity (NaN drops
    every hit), are InputErrors saying what to pass."""
    if k is None:
        k = settings.k
    elif isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise InputError(f"k must be a whole number of hits, 1 or more, not {k!r}")
    if floor is None:
        floor = settings.search_floor
    elif isinstance(floor, bool) or not isinstance(floor, numbers.Real) or not -1.0 <= float(floor) <= 1.0:
        raise InputError(f"floor must be a cosine similarity from -1 to 1, not {floor!r}")
    return int(k), float(floor)


def query_text(query: object) -> str:
    if not isinstance(query, str):
        raise InputError(f"a search query must be text (str), not {type(query).__name__}")
    return query


@lru_cache(maxsize=1024)
def query_terms(text: str) -> tuple[str, ...]:
    """The lexical terms of a cleaned query, analysed once per text: a turn's prefetch and its search
    read the same query."""
    return tuple(analyze(text))


class HybridRetriever:
    """Search one or more owner scopes and collections of a Store."""

    def __init__(self, store: Store, embedder: Embedder, settings: Settings,
                 reranker: Reranker | None = None):
        self.store, self.embedder, self.settings = store, embedder, settings
        self._prefetcher = store if isinstance(store, LexicalPrefetcher) else None  # checked once, not per search
        self.reranker = reranker or PassthroughReranker()

    def prefetch(self, query: str, *, k: int | None = None, owners: Sequence[str] = (SHARED,),
                 collections: Sequence[str] = ("kb",)) -> LexicalPrefetch | None:
        """Start the lexical arm of the hybrid search ``search(query, k=k, ...)`` will run, so it scores
        while the caller encodes the query; pass the result to ``search(prefetched=...)``.
        None when the store cannot (PostgreSQL, an in-memory SQLite), the setting is off, or the query
        has no terms. A search with other terms, k or scopes ignores it, so a wrong guess costs only
        the background work."""
        if not self.settings.retrieval_prefetch_lexical or self._prefetcher is None:
            return None
        k, _ = search_limits(k, None, self.settings)
        text, _ = clean_query(query_text(query), self.settings.max_query_chars)
        terms = query_terms(text) if text else ()
        if not terms:
            return None
        return self._prefetcher.prefetch_lexical(self._request(terms, None, k, owners, collections,
                                                         Arms.HYBRID))

    def search(self, query: str, *, k: int | None = None, floor: float | None = None,
               owners: Sequence[str] = (SHARED,), collections: Sequence[str] = ("kb",),
               arms: Arms = Arms.HYBRID, rerank: bool | None = None,
               vector: np.ndarray | None = None, prefetched: LexicalPrefetch | None = None,
               spare_lexical: int = 0, spare_floor: float = -1.0,
               weight_lexical: float | None = None) -> RetrievalOutcome:
        """Return an ok / empty / degraded outcome; never raises on odd query text (InputError on a query
        that is not text, a k below 1 or a floor outside -1..1: :func:`search_limits`).

        ``floor`` is a cosine floor, so it judges a candidate by the dense arm alone; the full-text arm's
        first ``spare_lexical`` candidates are held to ``spare_floor`` instead, since a chunk that arm
        ranks at the top has evidence of its own (reason ``floor_spared_lexical:M``: M of the hits shown
        are below ``floor``). ``weight_lexical`` replaces the setting's RRF weight of the full-text arm for
        this search (a caller that trusts its lexical query less, e.g. a rewrite of carried words)."""
        k, floor = search_limits(k, floor, self.settings)
        text, reasons = clean_query(query_text(query), self.settings.max_query_chars)
        if not text:
            return RetrievalOutcome(Status.EMPTY, query, reasons=(*reasons, "empty_query"))
        timings: dict[str, float] = {}
        terms = query_terms(text) if arms is not Arms.DENSE else ()
        if arms is not Arms.DENSE and not terms:
            reasons += ("lexical_no_terms",)
        vector = self._vector(text, vector, timings)
        result = self._search(self._request(terms, vector, k, owners, collections, arms, weight_lexical), prefetched)
        timings.update(result.timings_ms)
        if arms is Arms.HYBRID and terms and result.lexical_hits == 0:
            reasons += ("lexical_empty_dense_only",)
        use_rerank = self.settings.rerank if rerank is None else rerank
        kept, dropped, n_dropped = self._select(result.candidates, (floor, spare_floor, spare_lexical), k,
                                                use_rerank, owners, timings)
        kept, status, reasons = self._rerank(text, kept, use_rerank, timings, reasons)
        if not kept:
            reasons += ("all_below_floor",) if n_dropped else ("no_candidates",)
            status = Status.EMPTY
        spared = sum(h.similarity < floor for h in kept[:k])
        reasons += (f"floor_spared_lexical:{spared}",) if spared else ()
        return RetrievalOutcome(status, text, kept[:k], dropped, reasons, timings, n_dropped)

    def _search(self, request: SearchRequest, prefetched: LexicalPrefetch | None) -> StoreSearchResult:
        if prefetched is not None and self._prefetcher is not None:
            return self._prefetcher.search_prefetched(request, prefetched)
        return self.store.search(request)

    def _select(self, candidates: Sequence[Candidate], floors: tuple[float, float, int], k: int, rerank: bool,
                owners: Sequence[str], timings: dict) -> tuple[tuple[Hit, ...], tuple[Hit, ...], int]:
        """Apply the floor to every candidate (the lexical arm's first ``spare`` to ``low``); read chunk text
        only for what will be shown (the top k, all survivors when reranking, and the k best of those dropped)."""
        t0 = time.perf_counter()
        floor, low, spare = floors
        low = min(low, floor)  # a lower floor, never a higher one
        kept: list[Candidate] = []
        dropped: list[Candidate] = []
        for c in candidates:
            spared = c.lexical.rank is not None and c.lexical.rank <= spare
            (kept if c.similarity >= (low if spared else floor) else dropped).append(c)
        shown = kept if rerank else kept[:k]
        hits = self._hits([*shown, *dropped[:k]], owners)
        shown_ids = {c.chunk_id for c in shown}
        timings["fetch"] = (time.perf_counter() - t0) * 1e3
        return (tuple(h for h in hits if h.id in shown_ids), tuple(h for h in hits if h.id not in shown_ids),
                len(dropped))

    def _vector(self, text: str, vector: np.ndarray | None, timings: dict) -> np.ndarray:
        if vector is not None:
            return vector
        t0 = time.perf_counter()
        out = self.embedder.embed([text])[0]
        timings["embed"] = (time.perf_counter() - t0) * 1e3
        return out

    def _request(self, terms: tuple[str, ...], vector: np.ndarray | None, k: int, owners: Sequence[str],
                 collections: Sequence[str], arms: Arms, weight_lexical: float | None = None) -> SearchRequest:
        s = self.settings
        return SearchRequest(terms=terms, vector=vector, limit=s.candidate_multiplier * k,
                             owners=tuple(owners), collections=tuple(collections),
                             use_lexical=arms is not Arms.DENSE, use_dense=arms is not Arms.LEXICAL,
                             weight_lexical=s.weight_lexical if weight_lexical is None else max(0.0, weight_lexical),
                             weight_dense=s.weight_dense,
                             rrf_k=s.rrf_k, title_weight=s.lexical_title_weight,
                             skip_scope_test=s.lexical_skip_scope_test, in_memory_lexical=s.lexical_in_memory,
                             in_memory_min_chunks=s.lexical_in_memory_min_chunks,
                             in_memory_after=s.lexical_in_memory_after_searches)

    def _hits(self, candidates: Sequence, owners: Sequence[str]) -> tuple[Hit, ...]:
        chunks = {c.id: c for c in self.store.get_chunks([c.chunk_id for c in candidates], owners)}
        return tuple(Hit(chunk=chunks[c.chunk_id], score=c.fused, similarity=c.similarity,
                         lexical=c.lexical, dense=c.dense, fused=c.fused)
                     for c in candidates if c.chunk_id in chunks)

    def _rerank(self, text: str, hits: tuple[Hit, ...], use: bool, timings: dict,
                reasons: tuple[str, ...]) -> tuple[tuple[Hit, ...], Status, tuple[str, ...]]:
        if not use or not hits:
            return hits, Status.OK, reasons
        result = self.reranker.rerank(text, hits)
        timings["rerank"] = result.ms
        if result.degraded:
            return result.hits, Status.DEGRADED, (*reasons, result.degraded)
        return result.hits, Status.OK, reasons
