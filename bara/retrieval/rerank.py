"""Optional cross-encoder reranking of fused candidates, under a latency budget.

Why it is shaped like this:

* Reranking is an *optional* quality boost. bara ships no cross-encoder
  weights and ``sentence-transformers`` is an extra, so every failure to load or
  run the model degrades to a pass-through with a reason the trace can show,
  instead of failing the search.
* Nothing touches the network: models load with ``local_files_only=True``, so an
  unknown hub name fails fast and the failure is remembered (no retry storm).
* A cross-encoder costs a forward pass per (query, chunk) pair, so only the
  first ``budget_ms / ms_per_pair`` candidates are scored; ``ms_per_pair`` starts
  from a prior and follows measured calls so the cap adapts to the machine.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Protocol, Sequence

from bara.settings import Settings
from bara.types import Hit

#: Weight of the newest measurement in the per-pair cost average (``rerank_latency_ema_alpha``).
EMA_ALPHA: float = Settings.model_fields["rerank_latency_ema_alpha"].default

ST_MISSING = "reranker unavailable: sentence-transformers not installed (pip install 'bara[st]')"


@dataclass(frozen=True)
class RerankResult:
    """Reordered hits plus what the trace needs to explain the reordering."""

    hits: tuple[Hit, ...]
    scored: int  # candidates sent to the model (a prefix of the input)
    degraded: str | None  # None when fine; otherwise why hits passed through unchanged
    ms: float


class Reranker(Protocol):
    """Anything that can reorder a candidate list for a query."""

    def rerank(self, query: str, hits: Sequence[Hit]) -> RerankResult: ...


class PassthroughReranker:
    """The reranker used when reranking is off: keeps retrieval order as is."""

    def rerank(self, query: str, hits: Sequence[Hit]) -> RerankResult:
        return RerankResult(hits=tuple(hits), scored=0, degraded=None, ms=0.0)


def pair_cap(budget_ms: float, ms_per_pair: float) -> int:
    """How many pairs fit the budget; always at least one so reranking is never a no-op."""
    if ms_per_pair <= 0 or not math.isfinite(ms_per_pair):
        return 1
    return max(1, math.floor(budget_ms / ms_per_pair))


def order_by_scores(hits: Sequence[Hit], scores: Sequence[float]) -> tuple[Hit, ...]:
    """Sort the scored prefix by score (stable on ties), then keep the rest in retrieval order.

    The rest stays behind the scored prefix because its candidates were ranked
    lower by retrieval and have no comparable rerank score.
    """
    n = len(scores)
    rescored = [replace(h, score=float(s), rerank_score=float(s)) for h, s in zip(hits[:n], scores, strict=False)]
    rescored.sort(key=lambda h: -h.score)
    return tuple(rescored) + tuple(hits[n:])


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder, loaded lazily from local files only."""

    def __init__(self, model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2", budget_ms: float = 60.0,
                 ms_per_pair_estimate: float = 5.0, max_length: int = 256, ema_alpha: float = EMA_ALPHA) -> None:
        self.model_name = model
        self.ema_alpha = float(ema_alpha)
        self.budget_ms = float(budget_ms)
        self.max_length = max_length
        self._ms_per_pair = float(ms_per_pair_estimate)
        self._model: Any = None
        self._load_error: str | None = None
        self._lock = threading.Lock()

    # --- observability --------------------------------------------------
    @property
    def loaded(self) -> bool:
        """True once the model is in memory (it is not until the first rerank call)."""
        return self._model is not None

    @property
    def ms_per_pair(self) -> float:
        """Current per-pair cost estimate (prior, then moving average of measurements)."""
        return self._ms_per_pair

    @property
    def cap(self) -> int:
        """How many candidates the next call will score."""
        return pair_cap(self.budget_ms, self._ms_per_pair)

    def unavailable(self) -> str | None:
        """Load now (if not yet) and return why the model cannot be used, or None."""
        return self._ensure_model()[1]

    # --- main entry -----------------------------------------------------
    def rerank(self, query: str, hits: Sequence[Hit]) -> RerankResult:
        """Score the budgeted prefix of ``hits``; degrade to pass-through on any model problem."""
        start = time.perf_counter()
        hits = tuple(hits)
        if not hits:
            return RerankResult(hits=(), scored=0, degraded=None, ms=0.0)
        model, reason = self._ensure_model()
        if model is None:
            return RerankResult(hits=hits, scored=0, degraded=reason, ms=_since(start))
        head = hits[: self.cap]
        try:
            scores = self._score(model, query, head)
        except Exception as exc:  # a run-time failure is per call: report it, do not remember it
            return RerankResult(hits=hits, scored=0,
                                degraded=f"reranker failed: {type(exc).__name__}: {exc}", ms=_since(start))
        return RerankResult(hits=order_by_scores(hits, scores), scored=len(head), degraded=None,
                            ms=_since(start))

    # --- internals ------------------------------------------------------
    def _score(self, model: Any, query: str, head: Sequence[Hit]) -> list[float]:
        """Run the model on (query, chunk text) pairs and feed the timing to the estimate."""
        t0 = time.perf_counter()
        raw = model.predict([(query, h.chunk.text) for h in head], show_progress_bar=False,
                            convert_to_numpy=True)
        self._observe(_since(t0), len(head))
        scores = [float(s) for s in raw]
        if len(scores) != len(head):
            raise ValueError(f"model returned {len(scores)} scores for {len(head)} pairs")
        return scores

    def _observe(self, elapsed_ms: float, pairs: int) -> None:
        """Blend one measured per-pair cost into the estimate (load time is never included)."""
        if pairs <= 0:
            return
        measured = elapsed_ms / pairs
        with self._lock:
            self._ms_per_pair = self.ema_alpha * measured + (1 - self.ema_alpha) * self._ms_per_pair

    def _ensure_model(self) -> tuple[Any, str | None]:
        """Load once under a lock; a failure is remembered so later calls degrade immediately."""
        if self._model is not None or self._load_error is not None:
            return self._model, self._load_error
        with self._lock:
            if self._model is None and self._load_error is None:
                try:
                    self._model = self._load()
                except _Unavailable as exc:
                    self._load_error = str(exc)
            return self._model, self._load_error

    def _load(self) -> Any:
        """Import sentence-transformers and build the CrossEncoder without touching the network."""
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            if exc.name is not None and exc.name.split(".")[0] == "sentence_transformers":
                raise _Unavailable(ST_MISSING) from exc
            raise _Unavailable(f"reranker unavailable: sentence-transformers failed to import: {exc}") from exc
        try:
            return CrossEncoder(self.model_name, local_files_only=True, max_length=self.max_length)
        except OSError as exc:  # includes FileNotFoundError and the hub's "couldn't find in cache"
            raise _Unavailable(f"reranker unavailable: model {self.model_name!r} not found locally"
                               " — pass a local path via rerank_model") from exc
        except Exception as exc:
            raise _Unavailable(f"reranker unavailable: could not load model {self.model_name!r}: "
                               f"{type(exc).__name__}: {exc}") from exc


class _Unavailable(Exception):
    """Internal: carries the user-facing degrade reason out of ``_load``."""


def _since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def build_reranker(settings: Settings) -> Reranker:
    """Pick the reranker the settings ask for; building never loads a model."""
    if not settings.rerank:
        return PassthroughReranker()
    return CrossEncoderReranker(settings.rerank_model, settings.rerank_budget_ms,
                                settings.rerank_ms_per_pair_estimate, ema_alpha=settings.rerank_latency_ema_alpha)
