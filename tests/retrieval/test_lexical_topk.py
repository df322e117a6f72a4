"""A large knowledge base's lexical arm (``bara.store.lexical_topk``, ``sqlite_lexicon_file``): MaxScore's
top-k gives the rows, scores (bit for bit) and order, ties included, of scoring every match, on SciFact's
abstracts and on adversarial ties; the compact persisted lexicon holds what the in-memory one does, is
labelled with the scope's generations, and the store uses it above ``lexical_topk_min_chunks``."""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from store_contract import doc, request, vecs

from bara.store import lexical_topk, sqlite_lexicon_file
from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_bm25 import Lexicon, WholeHint, build_lexicon, idf_of, ranked_rows
from bara.store.sqlite_lexical import LEXICAL_SQL, lexical_params, lexical_rows
from bara.text.lexical import analyze

SCOPE = (("",), ("kb",))


def _exhaustive(lex: Lexicon, terms, weight: float, limit: int, avgdl_scale: float = 1.0):
    """Every match scored (``ranked_rows``) and MaxScore, under the lexicon's own statistics (``avgdl``
    optionally scaled, as when other scopes' rows move the table's average)."""
    spans = lex.spans(list(dict.fromkeys(terms)))
    hits = lex.holding([t for t, _, _ in spans])
    n_token = int(lex.tokens * avgdl_scale)
    full = ranked_rows([(lex, spans)], len(lex.ids), n_token, hits, weight, limit) if spans else []
    top = lexical_topk.top_rows(lex.rows_of, lex.counts, lex.length, lex.ids,
                                [(a, b, float(lex.bound[lex.terms[t]])) for t, a, b in spans],  # type: ignore[index]
                                [idf_of(len(lex.ids), hits[t]) for t, _, _ in spans],
                                float(n_token) / float(len(lex.ids)), weight, limit, lex.ref, seed_rows=64)
    return full, top


@pytest.fixture(scope="module")
def scifact(tmp_path_factory, request):
    data = request.getfixturevalue("data_dir")
    path = data / "scifact" / "corpus.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(1200), fh, strict=False)]
    folder = tmp_path_factory.mktemp("scifact")
    store = SQLiteStore(folder / "kb.db")
    for n in range(0, len(rows), 10):
        texts = [f"{r['title']}\n{r['text']}" for r in rows[n:n + 10]]
        store.write_document(doc(f"sf{n}.txt", texts), vecs(len(texts)))
    with (data / "scifact" / "queries.train.jsonl").open() as fh:
        queries = [tuple(analyze(json.loads(line)["text"])) for line in fh][:150]
    yield store, folder, queries
    store.close()


def _persisted(store: SQLiteStore, folder, page: int, monkeypatch) -> Lexicon:
    monkeypatch.setattr(sqlite_lexicon_file, "PAGE", page)  # several pages: the splice is exercised
    gens = store._matrix(*SCOPE).gens
    lex = sqlite_lexicon_file.build(store.query, *SCOPE, gens, folder / f"lex-{page}")
    assert lex is not None and lex.bound is not None
    return lex


@pytest.mark.parametrize("weight, scale", [(2.0, 1.0), (0.0, 1.0), (3.7, 1.0), (2.0, 1.9), (1.3, 0.6)])
def test_maxscore_gives_every_matchs_ranking_on_scifact(scifact, monkeypatch, weight, scale):
    store, folder, queries = scifact
    lex = _persisted(store, folder, 333, monkeypatch)
    pruned = 0
    for terms in queries:
        for limit in (1, 12, 36, 100):
            full, top = _exhaustive(lex, terms, weight, limit, scale)
            if top is not None:
                pruned += 1
                assert top == full, (terms, limit)
    assert pruned > len(queries)  # the top-k path answered, not only the fallback


def test_the_store_ranks_a_large_scope_by_maxscore_as_fts5_does(scifact):
    store, _, queries = scifact
    gens = store._matrix(*SCOPE).gens
    lex = sqlite_lexicon_file.build(store.query, *SCOPE, gens, Path(store.location + ".lex-probe"))
    assert lex is not None
    for terms in queries[:60]:
        req = replace(request("", None, limit=12), terms=terms)
        got = lex.rows(store.query, terms, req.title_weight, req.limit)
        if got is not None:  # None: a term FTS5 must tokenise
            assert got == lexical_rows(store.query(LEXICAL_SQL, lexical_params(req)))


def test_the_persisted_lexicon_holds_the_in_memory_ones_postings(scifact, monkeypatch):
    store, folder, _ = scifact
    lex = _persisted(store, folder, 250, monkeypatch)
    mem = build_lexicon(store.query, *SCOPE, lex.gens)
    assert mem is not None and set(mem.terms) == set(lex.terms)
    assert np.array_equal(mem.ids, lex.ids) and np.array_equal(mem.length, lex.length) and mem.tokens == lex.tokens
    assert lex.rows_of.dtype == np.uint32 and lex.counts.dtype == np.uint16 and lex.counts.shape[1] == 2
    for term, i in random.Random(3).sample(sorted(mem.terms.items()), 300):
        j = lex.terms[term]
        a, b = mem.start[i], mem.start[i + 1]
        c, d = lex.start[j], lex.start[j + 1]
        assert np.array_equal(mem.rows_of[a:b], lex.rows_of[c:d])
        assert np.array_equal(mem.counts[a:b, :2], lex.counts[c:d])
        g = lexical_topk.impact(1.0, lexical_topk.frequencies(mem.counts[a:b], 2.0), mem.length[mem.rows_of[a:b]],
                                lex.ref[1])
        assert lex.bound is not None and lex.bound[j] == g.max()


def test_a_persisted_lexicon_of_other_generations_is_not_loaded(scifact, monkeypatch):
    store, folder, _ = scifact
    lex = _persisted(store, folder, 5000, monkeypatch)
    where = folder / "lex-5000"
    assert sqlite_lexicon_file.load(where, lex.gens) is not None
    assert sqlite_lexicon_file.load(where, (lex.gens[0] + 1,)) is None
    (where / "meta.json").write_text("{broken")
    assert sqlite_lexicon_file.load(where, lex.gens) is None


def _tied(n_rows: int, rng: np.random.Generator) -> Lexicon:
    """Rows drawn from a few identical texts: whole blocks of rows share a score exactly."""
    texts = rng.integers(0, 40, size=n_rows)  # ~75 rows of each text
    patterns = [rng.integers(0, 3, size=(6, 2)) * (rng.random((6, 1)) < 0.2) for _ in range(40)]  # (body, heading)
    rows_of, counts, start = [], [], [0]
    for t in range(6):
        held = [r for r in range(n_rows) if patterns[texts[r]][t].sum() > 0 or r % 11 == 0]
        rows_of += held
        counts += [patterns[texts[r]][t] for r in held]
        start.append(len(rows_of))
    length = np.array([float(5 + texts[r] % 7) for r in range(n_rows)])
    rows = np.array(rows_of, dtype=np.uint32)
    count = np.array(counts, dtype=np.uint16).reshape(-1, 2)
    starts = np.array(start, dtype=np.int64)
    avgdl = float(length.mean())
    runs = starts[:-1][np.diff(starts) > 0]
    bound = np.zeros(6)
    bound[np.diff(starts) > 0] = lexical_topk.term_bounds(count, length[rows], runs, 2.0, avgdl)
    return Lexicon((1,), np.arange(10, 10 + 3 * n_rows, 3, dtype=np.int64), length, {f"t{i}": i for i in range(6)},
                   starts, rows, count, False, int(length.sum()), WholeHint(True), bound, (2.0, avgdl))


@pytest.mark.parametrize("seed", range(6))
def test_ties_at_the_limit_keep_the_lower_ids_as_every_match_does(seed):
    rng = np.random.default_rng(seed)
    lex = _tied(3000, rng)
    answered = cut = 0
    for _ in range(40):
        terms = tuple(f"t{i}" for i in rng.permutation(6)[:rng.integers(1, 7)])
        limit, weight = int(rng.choice([1, 5, 17, 64, 700])), float(rng.choice([0.0, 1.0, 2.0, 2.5]))
        full, top = _exhaustive(lex, terms, weight, limit)
        if top is not None:
            answered += 1
            assert top == full
            every = _exhaustive(lex, terms, weight, len(lex.ids))[0]
            cut += len(every) > limit and every[limit][1] == every[limit - 1][1]  # a tie across the limit
    assert answered and cut


def test_the_store_builds_persists_and_reloads_a_large_scope(tmp_path):
    rng = random.Random(5)
    words = "timer backoff window header cipher suite record session ticket alert".split()
    s = SQLiteStore(tmp_path / "kb.db", lexicon_topk_min=30)
    for n in range(8):
        s.write_document(doc(f"d{n}.txt", [" ".join(rng.choice(words) for _ in range(rng.randint(2, 20)))
                                           for _ in range(6)]), vecs(6))
    req = request("timer backoff cipher", None, limit=7, in_memory_min_chunks=0, in_memory_after=1)
    expected = s.search(replace(req, in_memory_lexical=False)).candidates
    s.search(req)
    s.wait_for_indexes()
    assert s.search(req).candidates == expected
    folder = sqlite_lexicon_file.folder_of(str((tmp_path / "kb.db").resolve()), *SCOPE)
    assert (folder / "meta.json").is_file()
    stamp = (folder / "rows.npy").stat().st_mtime_ns
    s.close()
    again = SQLiteStore(tmp_path / "kb.db", lexicon_topk_min=30)  # a restart maps the file, no rebuild
    again.search(req)
    again.wait_for_indexes()
    assert again.search(req).candidates == expected
    assert (folder / "rows.npy").stat().st_mtime_ns == stamp
    again.write_document(doc("late.txt", ["timer timer cipher", "backoff"]), vecs(2))
    fresh = again.search(replace(req, in_memory_lexical=False)).candidates
    again.search(req)
    again.wait_for_indexes()
    assert again.search(req).candidates == fresh != expected  # the new generation was built
    again.close()


def test_a_folder_that_cannot_be_written_leaves_the_scope_to_fts5(tmp_path, monkeypatch):
    s = SQLiteStore(tmp_path / "kb.db", lexicon_topk_min=2)
    s.write_document(doc("d.txt", ["timer backoff", "cipher timer", "window"]), vecs(3))

    def refuse(*args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr(sqlite_lexicon_file, "build", refuse)
    req = request("timer cipher", None, limit=2, in_memory_min_chunks=0, in_memory_after=1)
    expected = s.search(replace(req, in_memory_lexical=False)).candidates
    with pytest.warns(RuntimeWarning, match="could not write"):
        s.search(req)
        s.wait_for_indexes()
    assert s.search(req).candidates == expected
    assert s._lexicons._built[SCOPE] == (s._matrix(*SCOPE).gens, None)  # recorded: no rebuild on every search
    s.close()


def test_a_store_written_again_to_the_same_generations_does_not_load_the_old_index(tmp_path):
    path = tmp_path / "kb.db"
    req = request("timer cipher", None, limit=5, in_memory_min_chunks=0, in_memory_after=1)
    results = []
    for version, words in enumerate(("timer backoff cipher window", "cipher suite timer record alert")):
        rng = random.Random(9)
        s = SQLiteStore(path, lexicon_topk_min=2)
        texts = [" ".join(rng.choice(words.split()) for _ in range(9)) for _ in range(8)]  # as many tokens
        s.write_document(doc("d.txt", texts, version=str(version)), vecs(8))
        expected = s.search(replace(req, in_memory_lexical=False)).candidates
        s.search(req)
        s.wait_for_indexes()
        results.append((s.search(req).candidates, expected, s._matrix(*SCOPE).gens, s._lexicons._built[SCOPE][1]))
        s.close()
        for leftover in tmp_path.glob("kb.db*"):  # the store goes; its index folder stays
            if leftover.is_file():
                leftover.unlink()
    assert results[0][2] == results[1][2]  # the same generations
    assert results[1][0] == results[1][1] != results[0][1]  # the second store's own ranking, not the first's
    assert results[1][3] is not None  # from its own new index (a stale one would fail the probe and be dropped)
