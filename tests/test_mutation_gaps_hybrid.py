"""Hybrid retrieval and rank fusion at their edges (written against surviving mutants): reason codes
accumulate rather than replace, defaults come from Settings, a given vector is used as given, and
fusion ties are broken deterministically."""

from __future__ import annotations

import pytest

from bara.memory.knowledge import KnowledgeBase
from bara.retrieval.hybrid import Arms, HybridRetriever, clean_query
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.text.fusion import weighted_rrf
from bara.types import Status

TEXTS = {"tcp.txt": "TCP uses a retransmission timer. When the timer expires the segment is sent again.",
         "dns.txt": "The Domain Name System maps host names to addresses. Resolvers query name servers.",
         "hsts.txt": "HTTP Strict Transport Security lets a web site declare that browsers must only use HTTPS."}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, embedder):
    folder = tmp_path_factory.mktemp("gaps_hybrid")
    for name, text in TEXTS.items():
        (folder / name).write_text(text)
    settings = Settings(db=str(folder / "kb.db"), cache_dir=folder / "cache", k=2, search_floor=0.2)
    store = SQLiteStore(settings.db)
    KnowledgeBase(store, embedder, settings).ingest([folder])
    yield HybridRetriever(store, embedder, settings)
    store.close()


def test_clean_query_cap_boundary():
    assert clean_query("x" * 10, 10) == ("x" * 10, ())  # exactly at the cap: untouched
    assert clean_query("x" * 11, 10) == ("x" * 10, ("query_truncated",))


def test_lexical_miss_and_floor_reasons_are_both_kept(retriever):
    out = retriever.search("zzqxv wvvyq", floor=1.0)
    assert out.status == Status.EMPTY
    assert out.reasons == ("lexical_empty_dense_only", "all_below_floor")
    long = retriever.search("TCP " * (retriever.settings.max_query_chars // 4 + 10), floor=1.0)
    assert long.reasons[0] == "query_truncated" and long.reasons[-1] == "all_below_floor"


def test_stopword_query_reasons_per_arm(retriever):
    lexical = retriever.search("the of and", arms=Arms.LEXICAL)
    assert lexical.reasons[0] == "lexical_no_terms" and lexical.reasons[-1] == "no_candidates"
    dense = retriever.search("the of and", arms=Arms.DENSE, floor=-1.0)
    assert "lexical_no_terms" not in dense.reasons and "lexical_empty_dense_only" not in dense.reasons
    assert dense.hits
    hybrid = retriever.search("timer expires", arms=Arms.HYBRID)
    assert "lexical_empty_dense_only" not in hybrid.reasons
    lexical_only = retriever.search("zzqxv", arms=Arms.LEXICAL, floor=-1.0)
    assert "lexical_empty_dense_only" not in lexical_only.reasons


def test_defaults_come_from_settings(retriever):
    out = retriever.search("How does TCP resend a lost segment?")  # k and floor from Settings
    assert 0 < len(out.hits) <= retriever.settings.k
    assert all(h.similarity >= retriever.settings.search_floor for h in out.hits)
    assert all(h.similarity < retriever.settings.search_floor for h in out.dropped)
    assert out.timings_ms and "embed" in out.timings_ms


def test_empty_query_keeps_the_text_it_was_given(retriever):
    out = retriever.search("   \x00 ")
    assert out.status == Status.EMPTY and out.query == "   \x00 " and out.reasons == ("empty_query",)


def test_a_given_vector_is_used_instead_of_embedding_the_text(retriever, embedder):
    vector = embedder.embed(["Resolvers query name servers for host addresses"])[0]
    out = retriever.search("TCP retransmission timer", arms=Arms.DENSE, vector=vector, floor=-1.0, k=1)
    assert out.hits[0].chunk.source.endswith("dns.txt")
    assert "embed" not in out.timings_ms


def test_rrf_default_k_ties_and_errors():
    (a, score), = weighted_rrf([["a"]], [1.0])
    assert score == pytest.approx(1 / 61)
    tie = weighted_rrf([["a", "b"], ["b", "a"]], [1.0, 1.0])
    assert [d for d, _ in tie] == ["a", "b"] and tie[0][1] == tie[1][1]
    best_rank = weighted_rrf([["x", "y"], ["z"], ["y"]], [1.0, 0.0, 0.0], k=1)
    assert [d for d, _ in best_rank][:2] == ["x", "y"]
    with pytest.raises(ValueError, match="2 rankings but 1 weights"):
        weighted_rrf([["a"], ["b"]], [1.0])
    with pytest.raises(ValueError, match="rrf k must be positive"):
        weighted_rrf([["a"]], [1.0], k=0)


def test_rrf_equal_scores_are_ordered_by_best_rank_before_first_appearance():
    fused = weighted_rrf([["r", "s", "q"], ["p"]], [1.0, 0.5], k=1)  # q: 1/4 at rank 3; p: 0.5/2 at rank 1
    assert [d for d, _ in fused] == ["r", "s", "p", "q"]
    assert dict(fused)["p"] == dict(fused)["q"]
