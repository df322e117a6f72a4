"""HybridRetriever over a real SQLite store and the real MiniLM embedder."""

from __future__ import annotations

import pytest

from bara.memory.knowledge import KnowledgeBase
from bara.retrieval.hybrid import Arms, HybridRetriever
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.text.lexical import analyze
from kb_helpers import retriever_over
from bara.types import Status, StoreSearchResult
from bara.retrieval.hybrid import clean_query
from bara.text.fusion import weighted_rrf

TEXTS = {
    "tcp.txt": "TCP uses a retransmission timer. When the timer expires the segment is sent again.\n\n"
               "Fast retransmit reacts to three duplicate acknowledgements before the timer expires.",
    "dns.txt": "The Domain Name System maps host names to addresses. Resolvers query name servers.\n\n"
               "A resource record has an owner name, a type, a class, a TTL and record data.",
    "hsts.txt": "HTTP Strict Transport Security lets a web site declare that browsers must only use HTTPS.\n\n"
                "The max-age directive says how many seconds the policy is remembered.",
}


@pytest.fixture(scope="module")
def kb(tmp_path_factory, embedder):
    with retriever_over(tmp_path_factory.mktemp("kb"), TEXTS, embedder) as retriever:
        yield retriever


def test_hybrid_finds_the_right_document_with_arm_details(kb):
    out = kb.search("what happens when the retransmission timer expires", floor=0.0)
    assert out.status is Status.OK
    top = out.hits[0]
    assert top.chunk.source.endswith("tcp.txt")
    assert top.lexical.rank is not None and top.dense.rank is not None
    assert top.score == pytest.approx(top.fused)


@pytest.mark.parametrize("query", ['"quoted" AND (NEAR x*) : col:val', "*", "NEAR(", "((", "a:b", "OR AND NOT"])
def test_fts_syntax_never_raises(kb, query):
    out = kb.search(query, floor=-1.0)
    assert out.status in (Status.OK, Status.EMPTY)


def test_empty_query_is_a_clear_empty_outcome(kb):
    out = kb.search("   \x00\x07  ")
    assert out.status is Status.EMPTY and "empty_query" in out.reasons and out.hits == ()


def test_stopword_only_query_goes_to_the_dense_arm(kb):
    out = kb.search("what is it that they do", floor=-1.0)
    assert "lexical_no_terms" in out.reasons
    assert all(h.lexical.rank is None for h in out.hits) and out.hits


def test_lexical_miss_falls_back_to_dense(kb):
    out = kb.search("zyxwvut qwertyuiop", floor=-1.0)
    assert "lexical_empty_dense_only" in out.reasons
    assert out.hits and all(h.dense.rank is not None for h in out.hits)


XYLO_TOPICS = ["TCP congestion control halves the window after loss.", "DNS resolvers cache answers for the TTL.",
               "TLS handshakes negotiate a cipher suite.", "HTTP caches store responses with validators.",
               "TCP retransmits lost segments after a timeout.", "TCP fast retransmit uses duplicate ACKs.",
               "Packet loss signals congestion to TCP senders.", "Orchestra inventory: one xylophone."]
XYLO_QUERY = "xylophone: how does congestion control react to packet loss in TCP"


def _xylo(tmp_path, embedder) -> tuple[SQLiteStore, HybridRetriever, StoreSearchResult]:
    """A store of XYLO_TOPICS, its retriever, and the store's fused candidates for XYLO_QUERY (k 3)."""
    settings = Settings(db=str(tmp_path / "x.db"), cache_dir=tmp_path / "c", candidate_multiplier=1)
    store = SQLiteStore(settings.db)
    kb = KnowledgeBase(store, embedder, settings)
    for n, text in enumerate(XYLO_TOPICS):
        kb.add_text(f"doc{n}", text)
    r = HybridRetriever(store, embedder, settings)
    return store, r, store.search(r._request(tuple(analyze(XYLO_QUERY)), embedder.embed([XYLO_QUERY])[0], 3,
                                             ("",), ("kb",), Arms.HYBRID))


def test_floor_applies_to_lexical_only_hits_too(tmp_path, embedder):
    """A chunk found only by BM25 (a rare word, unrelated meaning) is still held to the floor."""
    store, r, result = _xylo(tmp_path, embedder)
    query = XYLO_QUERY
    xylo = [c for c in result.candidates if c.dense.rank is None and c.lexical.rank is not None]
    assert xylo, "the query must produce a lexical-only candidate"
    strict = r.search(query, k=3, floor=1.0)  # the highest floor there is: only an identical text reaches it
    assert strict.status is Status.EMPTY and "all_below_floor" in strict.reasons
    assert strict.n_dropped == len(result.candidates) > 3  # more than the dense arm alone could supply
    above = r.search(query, k=3, floor=xylo[0].similarity + 1e-6)
    assert all(h.id != xylo[0].chunk_id for h in above.hits)
    store.close()


def test_arms_switch(kb):
    lex = kb.search("retransmission", arms=Arms.LEXICAL, floor=-1.0)
    assert lex.hits and all(h.dense.rank is None for h in lex.hits)
    den = kb.search("retransmission", arms=Arms.DENSE, floor=-1.0)
    assert den.hits and all(h.lexical.rank is None for h in den.hits)


def test_k_caps_hits_and_candidates_come_from_multiplier(kb):
    out = kb.search("timer", k=1, floor=-1.0)
    assert len(out.hits) == 1


def test_long_query_is_truncated_with_reason(kb):
    out = kb.search("timer " * 5000, floor=-1.0)
    assert "query_truncated" in out.reasons and len(out.query) <= kb.settings.max_query_chars


def test_unavailable_reranker_degrades_with_reason(kb):
    from bara.retrieval.rerank import CrossEncoderReranker

    r = HybridRetriever(kb.store, kb.embedder, kb.settings, CrossEncoderReranker("no/such-model"))
    plain = kb.search("retransmission timer", floor=0.0)
    out = r.search("retransmission timer", floor=0.0, rerank=True)
    assert out.status is Status.DEGRADED
    assert any("reranker unavailable" in reason for reason in out.reasons)
    assert [h.id for h in out.hits] == [h.id for h in plain.hits]


def test_the_lexical_arms_first_candidates_can_be_held_to_a_lower_floor(tmp_path, embedder):
    """``spare_lexical`` N holds the full-text arm's first N candidates to ``spare_floor`` instead of the
    cosine floor, says how many of the hits shown it kept so, and spares nothing the lexical arm did not rank."""
    store, r, result = _xylo(tmp_path, embedder)
    ranked = result.candidates
    by_lexical = sorted((c for c in ranked if c.lexical.rank is not None), key=lambda c: c.lexical.rank or 0)
    assert len(by_lexical) >= 3
    for spare in (1, 2):
        out = r.search(XYLO_QUERY, k=3, floor=1.0, spare_lexical=spare)  # above every cosine; spare floor -1
        assert {h.id for h in out.hits} == {c.chunk_id for c in by_lexical[:spare]}
        assert out.status is Status.OK and f"floor_spared_lexical:{spare}" in out.reasons
        assert out.n_dropped == len(ranked) - spare
    second = by_lexical[1].similarity  # a spare floor between the two: only the one above it is kept
    first = by_lexical[0].similarity
    out = r.search(XYLO_QUERY, k=3, floor=1.0, spare_lexical=2, spare_floor=(first + second) / 2)
    assert [h.id for h in out.hits] == [(by_lexical[0] if first > second else by_lexical[1]).chunk_id]
    none = r.search(XYLO_QUERY, k=3, floor=1.0)
    assert none.status is Status.EMPTY and not any(x.startswith("floor_spared") for x in none.reasons)
    above = r.search(XYLO_QUERY, k=3, floor=-1.0, spare_lexical=2)  # nothing below the floor: nothing spared
    assert not any(x.startswith("floor_spared") for x in above.reasons)
    store.close()


# Hybrid retrieval and rank fusion at their edges (written against surviving mutants): reason codes
# accumulate rather than replace, defaults come from Settings, a given vector is used as given, and
# fusion ties are broken deterministically.


EDGE_TEXTS = {"tcp.txt": "TCP uses a retransmission timer. When the timer expires the segment is sent again.",
         "dns.txt": "The Domain Name System maps host names to addresses. Resolvers query name servers.",
         "hsts.txt": "HTTP Strict Transport Security lets a web site declare that browsers must only use HTTPS."}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, embedder):
    folder = tmp_path_factory.mktemp("gaps_hybrid")
    for name, text in EDGE_TEXTS.items():
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
