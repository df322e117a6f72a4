"""The lexical arm started before the query is encoded (issue 16): the SQLite store runs it on a
second, read-only connection, and a search takes its rows only when they answer that very request.
Results are the same rows either way; a wrong guess, a failed worker or a store that cannot prefetch
falls back to the search's own lexical arm."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from kb_helpers import rfc_bara
from store_contract import doc, request, vecs
from bara.app import Bara
from bara.turn.gated import Assistant
from bara.retrieval.hybrid import HybridRetriever
from bara.settings import Settings
from bara.store.base import LexicalPrefetch, LexicalPrefetcher, lexical_key
from bara.store.sqlite import SQLiteStore
from bara.text.lexical import analyze
from bara.types import SearchRequest

QUERIES = ("What does the includeSubDomains directive do?", "TLS certificate validation of the server name",
           "MUST NOT and SHOULD NOT key words", "max-age")


def _hits(outcome) -> list[tuple]:
    return [(h.id, h.fused, h.lexical.rank, h.dense.rank) for h in outcome.hits + outcome.dropped]


def _lexical_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("bara-lexical")]


@pytest.mark.parametrize("query", QUERIES)
def test_a_prefetched_lexical_arm_gives_the_same_hits_as_the_searchs_own(rfc_kb, embedder, query):
    with rfc_bara(rfc_kb, embedder, "prefetch-same") as bara:
        retriever: HybridRetriever = bara.retriever
        vector = embedder.embed([query])[0]
        prefetched = retriever.prefetch(query, k=4)
        assert prefetched is not None and prefetched.rows.result()  # it ran, and found rows
        assert _hits(retriever.search(query, k=4, vector=vector, prefetched=prefetched)) == \
            _hits(retriever.search(query, k=4, vector=vector))


def _request(query: str, limit: int = 12) -> SearchRequest:
    return SearchRequest(terms=tuple(analyze(query)), vector=None, limit=limit)


def _done(rows: list[tuple[int, float]]) -> Future:
    future: Future = Future()
    future.set_result(rows)
    return future


def test_a_search_takes_prefetched_rows_only_for_its_own_request(rfc_kb):
    store = SQLiteStore(rfc_kb("prefetch-key"))
    try:
        request = _request("includeSubDomains directive")
        own = store.search(request)
        chosen = own.candidates[-1].chunk_id  # the own arm's last lexical candidate, put first
        planted = LexicalPrefetch(lexical_key(request), _done([(chosen, 99.0)]), request.limit)
        assert [c.chunk_id for c in store.search_prefetched(request, planted).candidates] == [chosen]
        for other in (_request("includeSubDomains directive", limit=8), _request("HSTS policy")):
            stale = LexicalPrefetch(lexical_key(other), _done([(chosen, 99.0)]), other.limit)
            got = store.search_prefetched(request, stale)  # another key: ignored, the search runs its own
            assert (got.candidates, got.lexical_hits) == (own.candidates, own.lexical_hits)
    finally:
        store.close()


def test_the_lexical_arm_ranks_ties_by_chunk_id(tmp_path):
    """Equal texts score equally: the lower chunk id comes first, whatever the limit (a total order,
    which lets a ranking cut at any limit answer every smaller one)."""
    store = SQLiteStore(tmp_path / "ties.db")
    try:
        store.write_document(doc("zz.txt", ["window scaling", "selective acknowledgement", "path mtu"]), vecs(3))
        for source in ("cc.txt", "aa.txt", "bb.txt"):  # out of name order: chunk ids follow the writes
            store.write_document(doc(source, ["retransmission timer backoff", "checksum of the header"]), vecs(2))
        wide = store.prefetch_lexical(request("retransmission backoff", None, limit=10))
        rows = store.search(request("retransmission backoff", None, limit=10))
        ids = [c.chunk_id for c in rows.candidates]
        assert len(ids) == 3 and len({c.lexical.score for c in rows.candidates}) == 1  # one score, three chunks
        assert ids == sorted(ids)
        for limit in (1, 2):
            narrow = request("retransmission backoff", None, limit=limit)
            assert [c.chunk_id for c in store.search(narrow).candidates] == ids[:limit]
            assert store.search_prefetched(narrow, wide).candidates == store.search(narrow).candidates
    finally:
        store.close()


def test_a_prefetch_ranked_for_a_larger_limit_answers_a_smaller_one(rfc_kb):
    """The gate may reduce k after the arm started for the largest k: the search takes the leading
    rows, which are the rows its own arm returns (ties: ``test_the_lexical_arm_ranks_ties_by_chunk_id``)."""
    store = SQLiteStore(rfc_kb("prefetch-limit"))
    try:
        for query in (*QUERIES, "server certificate", "cookie attribute domain"):
            wide = store.prefetch_lexical(_request(query, limit=40))
            assert wide is not None
            for limit in (1, 5, 12, 39, 40):
                request = _request(query, limit)
                own = store.search(request)
                got = store.search_prefetched(request, wide)
                assert (got.candidates, got.lexical_hits) == (own.candidates, own.lexical_hits)
        request = _request("includeSubDomains directive", limit=2)
        own = store.search(request)
        chosen = own.candidates[-1].chunk_id  # planted first in a longer ranking: taken, cut at 2
        planted = LexicalPrefetch(lexical_key(request), _done([(chosen, 9.0), (chosen + 1, 8.0), (chosen + 2, 7.0)]), 3)
        got = store.search_prefetched(request, planted)
        assert (got.candidates[0].chunk_id, got.lexical_hits) == (chosen, 2)
        narrow = LexicalPrefetch(lexical_key(request), _done([(chosen, 9.0)]), 1)  # cut shorter: ignored
        got = store.search_prefetched(request, narrow)
        assert (got.candidates, got.lexical_hits) == (own.candidates, own.lexical_hits)
    finally:
        store.close()


def test_a_guess_for_another_query_is_ignored(rfc_kb, embedder):
    with rfc_bara(rfc_kb, embedder, "prefetch-miss") as bara:
        query, vector = QUERIES[1], embedder.embed([QUERIES[1]])[0]
        wrong = bara.retriever.prefetch(QUERIES[0], k=4)
        assert wrong is not None
        assert _hits(bara.retriever.search(query, k=4, vector=vector, prefetched=wrong)) == \
            _hits(bara.retriever.search(query, k=4, vector=vector))


def test_a_worker_that_cannot_open_the_file_falls_back_to_the_own_connection(rfc_kb):
    db = rfc_kb("prefetch-fail")
    store = SQLiteStore(db)
    try:
        request = _request("includeSubDomains directive")
        expected = store.search(request)
        db.unlink()  # the store's own connection keeps its open file; a new connection finds none
        prefetched = store.prefetch_lexical(request)
        assert prefetched is not None and prefetched.rows.exception() is not None
        got = store.search_prefetched(request, prefetched)
        assert (got.candidates, got.lexical_hits) == (expected.candidates, expected.lexical_hits)
    finally:
        store.close()


def test_stores_that_cannot_prefetch_say_so(tmp_path):
    memory = SQLiteStore(":memory:")
    try:
        assert isinstance(memory, LexicalPrefetcher) and memory.prefetch_lexical(_request("anything")) is None
    finally:
        memory.close()
    with Bara(Settings(db=str(tmp_path / "off.db"), cache_dir=tmp_path, retrieval_prefetch_lexical=False)) as bara:
        assert bara.retriever.prefetch("anything at all") is None  # the setting turns it off
    with Bara(Settings(db=str(tmp_path / "on.db"), cache_dir=tmp_path)) as bara:
        assert bara.retriever.prefetch("the and of") is None  # no terms: nothing to score


def test_closing_the_store_stops_its_worker(rfc_kb):
    before = len(_lexical_threads())
    store = SQLiteStore(rfc_kb("prefetch-close"))
    prefetched = store.prefetch_lexical(_request("includeSubDomains"))
    assert prefetched is not None and prefetched.rows.result()
    assert len(_lexical_threads()) == before + 1
    store.close()
    assert len(_lexical_threads()) == before
    assert store.prefetch_lexical(_request("includeSubDomains")) is None


@pytest.mark.parametrize("mode", ["gated", "always"])
def test_turns_are_the_same_with_and_without_the_prefetch(rfc_kb, embedder, mode):
    messages = (QUERIES[0], "and what about its max-age?", "Tell me more about it", QUERIES[2])
    runs = []
    for prefetch in (False, True):
        db = rfc_kb(f"prefetch-turns-{mode}-{prefetch}")
        with Bara(Settings(db=str(db), cache_dir=db.parent, retrieval_prefetch_lexical=prefetch),
                  embedder=embedder) as bara:
            assistant, cid, out = Assistant(bara, mode=mode), None, []
            for message in messages:
                r = assistant.turn("u-prefetch", message, cid)
                cid = r.conversation_id
                out.append((r.answer, r.trace.reasons, r.trace.retrieval_query,
                            [(h.id, h.fused) for h in r.trace.hits], [h.id for h in r.trace.dropped_hits]))
            if prefetch:
                assert _lexical_threads()  # the turns did start the worker
            runs.append(out)
    assert runs[0] == runs[1]


def _inherited_prefetch(store: SQLiteStore, out) -> None:  # the parent's store, used in the forked child
    prefetched = store.prefetch_lexical(_request("includeSubDomains"))
    out.put(len(prefetched.rows.result(timeout=20)) if prefetched is not None else -1)


def test_a_forked_child_gets_a_worker_of_its_own(rfc_kb):
    """The pool's thread does not survive a fork; a child using the parent's store must not wait forever."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    store = SQLiteStore(rfc_kb("prefetch-fork"))
    try:
        expected = len(store.prefetch_lexical(_request("includeSubDomains")).rows.result())  # parent's thread
        out = ctx.Queue()
        child = ctx.Process(target=_inherited_prefetch, args=(store, out))
        child.start()
        child.join(30)
        assert child.exitcode == 0 and out.get(timeout=5) == expected
    finally:
        store.close()
