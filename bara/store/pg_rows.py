"""Rows between psycopg and bara's records: a chunk's INSERT parameters, the hybrid search's named
parameters, and the records built from the search's and ``get_chunks``' result rows."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from bara.text.lexical import index_text
from bara.types import SHARED, ArmScore, Candidate, Document, SearchRequest, StoredChunk


def chunk_row(doc: Document, chunk: Any, vec: np.ndarray) -> tuple:
    heading = " ".join(filter(None, (doc.title, chunk.section, chunk.title)))
    return (doc.owner, doc.collection, chunk.ordinal, chunk.text, chunk.section, chunk.title,
            chunk.start, chunk.end, chunk.content_hash, index_text(chunk.text), index_text(heading), vec)


def search_params(req: SearchRequest, private_exact_max: int = 2000, bounded_min_rows: int = 0,
                   candidates: int = 5000) -> dict[str, Any]:
    tw = max(req.title_weight, 1e-6)
    body, head = (1.0 / tw, 1.0) if tw >= 1.0 else (1.0, tw)
    has_vector = req.vector is not None
    terms = list(dict.fromkeys(req.terms))
    return {
        "query": " or ".join(terms), "use_lexical": bool(req.use_lexical and req.terms), "terms": terms,
        # bounded_min_rows 0: the exact arm always (lex_size reads nothing and is 0, below the minimum 1)
        "lex_bounded": bounded_min_rows > 0, "lex_bounded_min": max(1, int(bounded_min_rows)),
        "lex_candidates": int(candidates),
        "rank_weights": [body, body, body, head], "owners": list(req.owners),
        "collections": list(req.collections), "limit": int(req.limit),
        "vector": np.asarray(req.vector, dtype=np.float32) if has_vector else None,
        "dense": bool(req.use_dense and has_vector), "has_vector": has_vector,
        "has_shared": SHARED in req.owners, "private": [o for o in req.owners if o != SHARED],
        "private_exact_max": int(private_exact_max),
        "w_lex": float(req.weight_lexical), "w_den": float(req.weight_dense), "rrf_k": float(req.rrf_k),
    }


def _arm(rank: Any, score: Any) -> ArmScore:
    return ArmScore(None, None) if rank is None else ArmScore(int(rank), float(score))


def candidate(r: tuple) -> Candidate:
    return Candidate(int(r[0]), float(r[1]), _arm(r[2], r[3]), _arm(r[4], r[5]), float(r[6]))


def stored(r: tuple) -> StoredChunk:
    meta = json.loads(r[11]) if r[11] else {}
    return StoredChunk(id=int(r[0]), text=r[1], source=r[2], section=r[3], title=r[4] or r[10], collection=r[5],
                       owner=r[6], ordinal=r[7], start=r[8], end=r[9], meta={**meta, "doc_title": r[10]})
