"""PostgreSQL: a small private scope's vectors stay out of the HNSW graph (``bara.store.pg_flat``, issue 33).

Where each row's vector is (``embedding``: in the graph; ``flat``: not) is read back as the owner, and the
searches that must still find a flat row are checked by what they return."""

from __future__ import annotations

from typing import LiteralString, cast

import numpy as np
import psycopg
from psycopg import sql

from bara.store.pg_lexical import rebuild_statements
from bara.types import SHARED
from store_contract import doc, request, unit, vecs


def _places(pg_server_urls, schema: str) -> dict[str, str]:
    """Each chunk's text -> "graph" (``embedding`` set) or "flat" (``flat`` set), as the owner."""
    with psycopg.connect(pg_server_urls.owner_url, autocommit=True) as conn, conn.transaction():
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute("SELECT set_config('bara.owners', '*', true)")
        rows = conn.execute("SELECT text, embedding IS NOT NULL, flat IS NOT NULL FROM chunks").fetchall()
    assert all(graph != flat for _, graph, flat in rows)  # exactly one of the two holds the vector
    return {text: "graph" if graph else "flat" for text, graph, _ in rows}


def _texts(store, result) -> list[str]:
    by_id = {c.id: c.text for c in store.get_chunks([c.chunk_id for c in result.candidates])}
    return [by_id[c.chunk_id] for c in result.candidates]


def test_a_small_private_scope_is_flat_until_it_is_marked(pg_store_factory, pg_server_urls, pg_schema):
    store = pg_store_factory(lexical_terms_min_rows=3)
    store.write_document(doc("kb", ["shared one", "shared two"]), vecs(2))
    store.write_document(doc("q1", ["alice one", "alice two"], owner="alice", collection="qa"), vecs(2, start=4))
    assert _places(pg_server_urls, pg_schema) == {"shared one": "graph", "shared two": "graph",
                                                  "alice one": "flat", "alice two": "flat"}
    query = request("", unit(0, 0, 0, 0, 0, 1.0), owners=(SHARED, "alice"), collections=("kb", "qa"), use_lexical=False)
    res = store.search(query)
    assert _texts(store, res)[0] == "alice two" and abs(res.candidates[0].dense.score - 1.0) < 1e-5
    store.write_document(doc("q2", ["alice three"], owner="alice", collection="qa"), vecs(1, start=6))  # 3 rows: marked
    assert set(_places(pg_server_urls, pg_schema).values()) == {"graph"}  # the marking write moved the scope's vectors
    assert _texts(store, store.search(query))[0] == "alice two"
    bob = pg_store_factory(lexical_terms_min_rows=3)
    bob.write_document(doc("b", ["bob one"], owner="bob", collection="qa"), vecs(1))
    assert _places(pg_server_urls, pg_schema)["bob one"] == "flat"  # another scope: unmarked, flat


def test_above_the_exact_size_a_flat_scope_beside_a_large_one_is_still_ranked(pg_store_factory, pg_server_urls, pg_schema):
    """Over ``private_exact_max`` rows the dense arm takes the HNSW pass, which returns ``limit`` rows of
    the large (marked) collection; the small collection's flat row, the nearest, must still come first."""
    store = pg_store_factory(lexical_terms_min_rows=5, private_exact_max=3)
    store.write_document(doc("big", [f"big {i}" for i in range(8)], owner="alice", collection="big"), vecs(8))
    store.write_document(doc("small", ["small one"], owner="alice", collection="small"), unit(*[1.0] * 8)[None, :])
    places = _places(pg_server_urls, pg_schema)
    assert places["small one"] == "flat" and {places[f"big {i}"] for i in range(8)} == {"graph"}
    query = request("", unit(*[1.0] * 8), owners=("alice",), collections=("big", "small"), limit=3,
                    use_lexical=False)
    res = store.search(query)
    assert _texts(store, res)[0] == "small one" and len(res.candidates) == 3


def test_a_new_vector_for_a_flat_row_stays_flat_and_a_rebuild_moves_every_one(pg_store_factory, pg_server_urls,
                                                                              pg_schema):
    store = pg_store_factory(lexical_terms_min_rows=100)
    store.write_document(doc("n", ["alice note"], owner="alice", collection="notes"), vecs(1))
    (chunk_id,) = [c.chunk_id for c in store.search(request("alice note", None, owners=("alice",),
                                                            collections=("notes",), use_dense=False)).candidates]
    new = unit(0, 0, 1.0)
    with store.scoped(["alice"]):  # what `bara reembed` sends
        store.executemany("UPDATE chunks SET embedding = ? WHERE id = ?", [(new, chunk_id)])
    assert _places(pg_server_urls, pg_schema) == {"alice note": "flat"}
    res = store.search(request("", new, owners=("alice",), collections=("notes",), use_lexical=False))
    assert abs(res.candidates[0].dense.score - 1.0) < 1e-5  # the new vector is the one ranked
    with psycopg.connect(pg_server_urls.owner_url, autocommit=True) as conn, conn.transaction():
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(pg_schema)))
        for statement in rebuild_statements():  # a bulk load's rebuild marks every scope
            conn.execute(cast(LiteralString, statement))
    assert _places(pg_server_urls, pg_schema) == {"alice note": "graph"}
    got = store.search(request("", new, owners=("alice",), collections=("notes",), use_lexical=False))
    assert np.isclose(got.candidates[0].dense.score, 1.0, atol=1e-5)
