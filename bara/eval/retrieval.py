"""`bara eval retrieval`: arms compared on a BEIR dataset with ir-measures.

The corpus is indexed once into a cached store (keyed by corpus hash, embedder
and lexical settings), one chunk per document (title + text), so repeated
evaluations neither re-embed nor re-index. Metrics come from ir-measures
(pytrec_eval underneath); nothing here computes a ranking metric by hand.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import ir_measures
import numpy as np
from ir_measures import RR, R, nDCG

from bara.errors import ConfigError, InputError
from bara.eval.beir import BeirData, BeirDoc, load_beir
from bara.eval.stats import percentiles
from bara.retrieval.hybrid import Arms, HybridRetriever
from bara.retrieval.protocol import Embedder
from bara.retrieval.rerank import CrossEncoderReranker, Reranker
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_ann import AnnConfig
from bara.types import Chunk, Document, RetrievalOutcome, text_hash

ARM_NAMES = ("bm25", "dense", "hybrid", "hybrid+rerank")
MEASURES = {"ndcg@10": nDCG @ 10, "recall@100": R @ 100, "mrr@10": RR @ 10}
INDEX_VERSION = "2"  # bump when the way documents are indexed changes


@dataclass(frozen=True)
class ArmSpec:
    name: str
    arms: Arms
    rerank: bool


ARMS = {"bm25": ArmSpec("bm25", Arms.LEXICAL, False), "dense": ArmSpec("dense", Arms.DENSE, False),
        "hybrid": ArmSpec("hybrid", Arms.HYBRID, False),
        "hybrid+rerank": ArmSpec("hybrid+rerank", Arms.HYBRID, True)}


def index_path(corpus: Path, embedder: Embedder, settings: Settings) -> Path:
    """One cached index per (corpus bytes, embedder, lexical settings)."""
    h = hashlib.sha256()
    with corpus.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    h.update(f"{getattr(embedder, 'cache_key', embedder.model_id)}|{INDEX_VERSION}".encode())
    return Path(settings.cache_dir) / "eval" / f"{corpus.stem.split('.')[0]}-{h.hexdigest()[:16]}.db"


def build_index(store: SQLiteStore, docs: Sequence[BeirDoc], embedder: Embedder,
                progress: Callable[[int], None] | None = None, batch: int = 256) -> None:
    """Write every document as one chunk; skips ids already stored (resumable)."""
    have = set(store.list_sources())
    todo = [d for d in docs if d.id not in have]
    for start in range(0, len(todo), batch):
        part = todo[start:start + batch]
        vectors = embedder.embed([_doc_text(d) for d in part])
        with store.transaction():
            for doc, vec in zip(part, vectors, strict=False):
                store.write_document(_document(doc), vec[None, :])
        if progress:
            progress(len(part))


def _doc_text(doc: BeirDoc) -> str:
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def _document(doc: BeirDoc) -> Document:
    chunk = Chunk(text=doc.text, source=doc.id, ordinal=0, start=0, end=len(doc.text), title=doc.title)
    return Document(source=doc.id, content_hash=text_hash(_doc_text(doc)), chunks=(chunk,), title="")


def run_arm(retriever: HybridRetriever, spec: ArmSpec, queries: dict[str, str],
            vectors: dict[str, np.ndarray], depth: int) -> tuple[dict, dict[str, list[float]]]:
    """Run one arm over all queries; returns the run and per-stage latencies (ms)."""
    run: dict[str, dict[str, float]] = {}
    stages: dict[str, list[float]] = {}
    for qid, text in queries.items():
        t0 = time.perf_counter()
        outcome = retriever.search(text, k=depth, floor=-1.0, arms=spec.arms, rerank=spec.rerank,
                                   vector=vectors[qid])
        total = (time.perf_counter() - t0) * 1e3
        run[qid] = _ranked(outcome)
        for stage, ms in {**outcome.timings_ms, "search": total}.items():
            stages.setdefault(stage, []).append(ms)
    return run, stages


def _ranked(outcome: RetrievalOutcome) -> dict[str, float]:
    """Scores that preserve bara's order exactly (ir-measures sorts by score)."""
    out: dict[str, float] = {}
    for rank, hit in enumerate(outcome.hits):
        out.setdefault(hit.chunk.source, float(len(outcome.hits) - rank))
    return out


def score(qrels: dict, run: dict) -> dict[str, float]:
    agg = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, run)
    return {name: round(float(agg[m]), 4) for name, m in MEASURES.items()}


def embed_queries(embedder: Embedder, queries: dict[str, str]) -> tuple[dict[str, np.ndarray], list[float]]:
    """Embed each query alone (as at serving time) and time it."""
    vectors, times = {}, []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        vectors[qid] = embedder.embed([text])[0]
        times.append((time.perf_counter() - t0) * 1e3)
    return vectors, times


@dataclass(frozen=True)
class ArmReport:
    """One arm's figures (the ``MEASURES`` names), end-to-end latency and per-stage latency."""

    scores: Mapping[str, float]
    latency_ms: Mapping[str, float | None]
    stages_ms: Mapping[str, Mapping[str, float | None]]

    def as_dict(self) -> dict[str, Any]:
        return {**self.scores, "latency_ms": dict(self.latency_ms),
                "stages_ms": {s: dict(v) for s, v in self.stages_ms.items()}}


@dataclass(frozen=True)
class SkippedArm:
    """An arm that could not run (e.g. the reranker's model is not installed), and why."""

    skipped: str

    def as_dict(self) -> dict[str, Any]:
        return {"skipped": self.skipped}


@dataclass(frozen=True)
class RetrievalReport:
    """What `bara eval retrieval` reports; ``as_dict`` is its JSON."""

    dataset: str
    n_queries: int
    n_docs: int
    problems: Mapping[str, int]
    arms: Mapping[str, ArmReport | SkippedArm]

    def as_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "n_queries": self.n_queries, "n_docs": self.n_docs,
                "problems": dict(self.problems), "arms": {k: a.as_dict() for k, a in self.arms.items()}}


def evaluate_retrieval(corpus: Path, queries: Path, qrels: Path, arms: Sequence[str], settings: Settings,
                       embedder: Embedder, reranker: Reranker | None = None,
                       progress: Callable[[str, int, int], None] | None = None) -> RetrievalReport:
    """The JSON report of `bara eval retrieval`."""
    data = load_beir(corpus, queries, qrels)
    judged = {q: t for q, t in data.queries.items() if q in data.qrels}
    if not judged:
        raise InputError(f"no query of {queries} ({len(data.queries)} read) has a judgment in {qrels} "
                         f"({len(data.qrels)} judged query ids): pass the queries and qrels of one dataset")
    store = SQLiteStore(prepared_index(corpus, embedder, settings), ann=AnnConfig.from_settings(settings))
    try:
        build_index(store, data.corpus, embedder,
                    (lambda n: progress("index", n, len(data.corpus))) if progress else None)
        return _report(corpus, data, judged, store, arms, settings, embedder, reranker)
    finally:
        store.close()


def prepared_index(corpus: Path, embedder: Embedder, settings: Settings) -> Path:
    """:func:`index_path` with its folder made; a cache folder that cannot hold it is a ConfigError."""
    path = index_path(corpus, embedder, settings)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"the evaluation index cannot be kept in {path.parent} ({exc.strerror or exc}): point "
                          "BARA_CACHE_DIR (cache_dir) at a writable folder") from exc
    return path


def _report(corpus: Path, data: BeirData, judged: dict, store: SQLiteStore, arms: Sequence[str],
            settings: Settings, embedder: Embedder, reranker: Reranker | None) -> RetrievalReport:
    raw = getattr(embedder, "inner", embedder)  # time real query encoding, not cache look-ups
    vectors, embed_ms = embed_queries(raw, judged)
    by_arm = {name: _arm_report(name, store, judged, vectors, embed_ms, data.qrels, settings, embedder, reranker)
              for name in arms}
    return RetrievalReport(corpus.name.split(".")[0], len(judged), len(data.corpus), dict(data.problems), by_arm)


def _arm_report(name: str, store: SQLiteStore, judged: dict, vectors: dict, embed_ms: list[float],
                qrels: dict, settings: Settings, embedder: Embedder,
                reranker: Reranker | None) -> ArmReport | SkippedArm:
    spec = ARMS[name]
    if spec.rerank:
        reranker = reranker or CrossEncoderReranker(settings.rerank_model, settings.rerank_budget_ms,
                                                    settings.rerank_ms_per_pair_estimate,
                                                    ema_alpha=settings.rerank_latency_ema_alpha)
        why = reranker.unavailable() if isinstance(reranker, CrossEncoderReranker) else None
        if why:
            return SkippedArm(why)
    retriever = HybridRetriever(store, embedder, settings, reranker)
    run, stages = run_arm(retriever, spec, judged, vectors, depth=100)
    if spec.arms is not Arms.LEXICAL:
        stages["embed"] = embed_ms
    stages["total"] = [a + b for a, b in zip(stages["search"], embed_ms, strict=False)] if "embed" in stages else stages["search"]
    return ArmReport(score(qrels, run), percentiles(stages["total"]),
                     {s: percentiles(v) for s, v in sorted(stages.items())})
