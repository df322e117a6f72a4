"""Reranker tests against a tiny BERT cross-encoder built on disk, never downloaded."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: no network ever
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import re
import sys
import threading
import time
from pathlib import Path

import pytest

from bara.retrieval.rerank import (
    EMA_ALPHA,
    ST_MISSING,
    CrossEncoderReranker,
    PassthroughReranker,
    RerankResult,
    build_reranker,
    order_by_scores,
    pair_cap,
)
from bara.settings import Settings
from bara.types import ArmScore, Hit, StoredChunk

QUERY = "how does the message format encode the header length field"

TEXTS = [
    "The message format starts with a fixed header that encodes the length field in network byte order.",
    "Retries use exponential backoff with jitter so that clients do not synchronise after an outage.",
    "The cache stores embeddings keyed by content hash, which makes re-indexing unchanged files cheap.",
    "A session token expires after thirty minutes of inactivity and must be refreshed by the client.",
    "Chunk overlap keeps facts that straddle a boundary findable by both neighbouring chunks.",
    "The header length field counts bytes, not characters, and excludes the trailing checksum.",
    "Garden tomatoes need full sun, regular watering and a support stake once the plants are tall.",
    "Reciprocal rank fusion combines the lexical and dense arms without calibrating their scores.",
]

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLER = ("alpha beta gamma delta epsilon zeta theta iota kappa lambda omicron sigma tau upsilon phi chi "
          "psi omega red green blue yellow orange purple black white north south east west river mountain "
          "forest ocean desert valley island city village road bridge tower castle market school library "
          "kitchen window door table chair paper pencil letter number answer question reason result system "
          "network server client request response error warning status update record report storage memory "
          "process thread signal socket packet stream buffer queue stack index search query document source "
          "section title score rank weight floor budget model vector matrix tensor layer token word text").split()


def _words(texts: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for text in texts:
        for w in re.findall(r"\w+|[^\w\s]", text.lower()):
            seen.setdefault(w, None)
    return list(seen)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Write a WordPiece vocab, a fast BERT tokenizer and a random 2-layer BERT scorer to one dir."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertTokenizerFast

    out = tmp_path_factory.mktemp("tiny-cross-encoder")
    vocab = SPECIALS + [w for w in dict.fromkeys(_words(TEXTS + [QUERY]) + FILLER) if w not in SPECIALS]
    vocab_file = out / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    # transformers 5.x takes the WordPiece vocab as a token->id mapping (a vocab_file kwarg is ignored)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True).save_pretrained(out)
    torch.manual_seed(1234)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=1, initializer_range=0.2)
    BertForSequenceClassification(config).eval().save_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert tok.convert_ids_to_tokens(tok("header length")["input_ids"]) == ["[CLS]", "header", "length", "[SEP]"]
    return out


def make_hits(texts: list[str] = TEXTS) -> tuple[Hit, ...]:
    """Hits in retrieval order, fused score descending, as the retriever would hand them over."""
    hits = []
    for i, text in enumerate(texts):
        chunk = StoredChunk(id=100 + i, text=text, source=f"doc{i}.md", section="", title="", collection="kb",
                            owner="", ordinal=i, start=0, end=len(text))
        fused = 1.0 / (60 + i + 1)
        hits.append(Hit(chunk=chunk, score=fused, similarity=0.5, lexical=ArmScore(i + 1, 1.0),
                        dense=ArmScore(i + 1, 0.5), fused=fused))
    return tuple(hits)


def ids(hits) -> list[int]:
    return [h.id for h in hits]


# --- with the tiny model ----------------------------------------------------

def test_model_loads_lazily(tiny_model: Path) -> None:
    reranker = CrossEncoderReranker(str(tiny_model), budget_ms=10_000)
    assert not reranker.loaded
    result = reranker.rerank(QUERY, make_hits())
    assert reranker.loaded and result.degraded is None


def test_order_matches_model_predict(tiny_model: Path) -> None:
    from sentence_transformers import CrossEncoder

    hits = make_hits()
    result = CrossEncoderReranker(str(tiny_model), budget_ms=10_000).rerank(QUERY, hits)
    assert result.scored == len(hits) and result.degraded is None and result.ms > 0
    reference = CrossEncoder(str(tiny_model), local_files_only=True).predict([(QUERY, t) for t in TEXTS])
    assert len(set(float(s) for s in reference)) == len(TEXTS), "tiny model must give distinct scores"
    expected = [100 + i for i in sorted(range(len(TEXTS)), key=lambda i: -float(reference[i]))]
    assert ids(result.hits) == expected
    by_id = {100 + i: float(s) for i, s in enumerate(reference)}
    for h in result.hits:
        assert h.rerank_score == pytest.approx(by_id[h.id], abs=1e-5)
        assert h.score == h.rerank_score
        assert h.fused == 1.0 / (60 + h.id - 100 + 1)  # retrieval scores survive
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_budget_caps_scored_prefix(tiny_model: Path) -> None:
    hits = make_hits()
    result = CrossEncoderReranker(str(tiny_model), budget_ms=10, ms_per_pair_estimate=5).rerank(QUERY, hits)
    assert result.scored == 2
    assert sorted(ids(result.hits[:2])) == ids(hits[:2])
    assert all(h.rerank_score is not None for h in result.hits[:2])
    assert result.hits[2:] == hits[2:]  # unscored rest: untouched, retrieval order


def test_measured_cost_updates_estimate(tiny_model: Path) -> None:
    reranker = CrossEncoderReranker(str(tiny_model), budget_ms=60, ms_per_pair_estimate=1e6)
    assert reranker.cap == 1
    reranker.rerank(QUERY, make_hits())
    assert 0 < reranker.ms_per_pair < 1e6  # load time is not counted, a measurement pulled it down


# --- degraded paths -----------------------------------------------------------

def test_unknown_model_degrades_once_and_passes_through() -> None:
    hits = make_hits()
    reranker = CrossEncoderReranker("no-such-org/no-such-cross-encoder")
    start = time.perf_counter()
    result = reranker.rerank(QUERY, hits)
    assert time.perf_counter() - start < 5, "a missing model must fail fast, without the network"
    assert result.hits == hits and result.scored == 0
    assert result.degraded == ("reranker unavailable: model 'no-such-org/no-such-cross-encoder' not found "
                               "locally — pass a local path via rerank_model")
    reranker._load = lambda: pytest.fail("a remembered load failure must not be retried")  # type: ignore[method-assign]
    assert reranker.rerank(QUERY, hits).degraded == result.degraded


def test_missing_sentence_transformers_degrades(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    hits = make_hits()
    result = CrossEncoderReranker("anything").rerank(QUERY, hits)
    assert result.degraded == ST_MISSING and result.hits == hits and result.scored == 0


class _FakeModel:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def predict(self, pairs, **_: object):
        if self.fail:
            raise RuntimeError("boom")
        return [float(len(doc)) for _, doc in pairs]


def test_runtime_failure_degrades_for_that_call(monkeypatch: pytest.MonkeyPatch) -> None:
    reranker = CrossEncoderReranker("fake")
    monkeypatch.setattr(reranker, "_load", lambda: _FakeModel(fail=True))
    hits = make_hits()
    result = reranker.rerank(QUERY, hits)
    assert result.hits == hits and result.degraded == "reranker failed: RuntimeError: boom"


def test_concurrent_first_calls_load_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reranker = CrossEncoderReranker("fake", budget_ms=10_000)
    loads = []

    def slow_load() -> _FakeModel:
        loads.append(1)
        time.sleep(0.05)
        return _FakeModel()

    monkeypatch.setattr(reranker, "_load", slow_load)
    results: list[RerankResult] = []
    threads = [threading.Thread(target=lambda: results.append(reranker.rerank(QUERY, make_hits())))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1 and len(results) == 8
    longest_first = [100 + i for i in sorted(range(len(TEXTS)), key=lambda i: -len(TEXTS[i]))]
    assert all(ids(r.hits) == longest_first and r.degraded is None for r in results)


# --- pure helpers and wiring ----------------------------------------------------

def test_pair_cap_and_moving_average() -> None:
    assert pair_cap(10, 5) == 2 and pair_cap(60, 5) == 12 and pair_cap(1, 5) == 1
    reranker = CrossEncoderReranker("fake", budget_ms=60, ms_per_pair_estimate=5)
    reranker._observe(10.0, 5)  # 2 ms/pair measured
    assert reranker.ms_per_pair == pytest.approx(EMA_ALPHA * 2 + (1 - EMA_ALPHA) * 5)
    assert reranker.cap == int(60 // reranker.ms_per_pair)


def test_order_by_scores_is_stable_on_ties() -> None:
    hits = make_hits()
    ordered = order_by_scores(hits, [1.0, 3.0, 1.0])
    assert ids(ordered) == [101, 100, 102] + ids(hits[3:])


def test_passthrough_and_empty_input() -> None:
    hits = make_hits()
    assert PassthroughReranker().rerank(QUERY, hits) == RerankResult(hits, 0, None, 0.0)
    reranker = CrossEncoderReranker("never-loaded")
    assert reranker.rerank(QUERY, []).hits == () and not reranker.loaded


def test_build_reranker_follows_settings() -> None:
    assert isinstance(build_reranker(Settings(rerank=False)), PassthroughReranker)
    built = build_reranker(Settings(rerank=True, rerank_model="/m", rerank_budget_ms=30,
                                    rerank_ms_per_pair_estimate=3))
    assert isinstance(built, CrossEncoderReranker) and not built.loaded
    assert (built.model_name, built.budget_ms, built.ms_per_pair, built.cap) == ("/m", 30.0, 3.0, 10)
