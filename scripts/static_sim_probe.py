"""Probe only (issue 31, round 3 session 9): similarity features from MiniLM's *static* word vectors.

``install(names)`` appends the named features to ``bara.understand.term_scorer.FEATURES`` and wraps
the rewrite's ``candidate_features`` so every candidate carries their values, for one run of
``scripts/train_rewrite_scorer.py --extra ...`` (nothing in bara changes). A word's vector is the mean
of its wordpieces' rows of ``embeddings.word_embeddings.weight`` (the table MiniLM's encoder starts
from; no encoder call), unit-normalised; ``centre`` subtracts the table's mean row first.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

import bara.understand.rewrite as rewrite_module
import bara.understand.term_scorer as term_scorer
from bara.understand.names import content_tuple

NAMES = ("sim_msg", "sim_max", "sim_prev", "central")


class _Vectors:
    def __init__(self, centre: bool):
        from bara.retrieval.embedders import load_tokenizer
        from bara.retrieval.minilm_build import minilm_weights
        from bara.retrieval.minilm_graph import read_safetensors

        table = np.array(read_safetensors(minilm_weights())["embeddings.word_embeddings.weight"], dtype=np.float32)
        self.table = table - table.mean(axis=0) if centre else table
        self.tokenizer = load_tokenizer(256)
        self.unk = self.tokenizer.token_to_id("[UNK]")
        self.cache: dict[str, np.ndarray | None] = {}

    def vec(self, word: str) -> np.ndarray | None:
        word = word.lower()
        if word not in self.cache:
            ids = [i for i in self.tokenizer.encode(word, add_special_tokens=False).ids if i != self.unk]
            v = self.table[ids].mean(axis=0) if ids else None
            n = float(np.linalg.norm(v)) if v is not None else 0.0
            self.cache[word] = v / n if v is not None and n > 0 else None
        return self.cache[word]

    def mean(self, words) -> np.ndarray | None:
        vs = [v for v in (self.vec(w) for w in words) if v is not None]
        if not vs:
            return None
        m = np.mean(vs, axis=0)
        n = float(np.linalg.norm(m))
        return m / n if n > 0 else None


def _values(vectors: _Vectors, names: list[str], message, users, candidates, centrality) -> list[tuple[float, ...]]:
    """The named features' values of each candidate (0 for a word without a vector)."""
    words = list(content_tuple(message))
    msg_vs = [v for v in (vectors.vec(w) for w in words) if v is not None]
    msg_mean = vectors.mean(words)
    prev_mean = vectors.mean(content_tuple(users[-1])) if users else None
    central = centrality(tuple(c.word for c in candidates)) if "central" in names else ()
    out = []
    for k, c in enumerate(candidates):
        v = vectors.vec(c.word)
        values = {"sim_msg": 0.0, "sim_max": 0.0, "sim_prev": 0.0, "central": central[k] if central else 0.0}
        if v is not None:
            values["sim_msg"] = round(float(v @ msg_mean), 4) if msg_mean is not None else 0.0
            values["sim_max"] = round(max(float(v @ m) for m in msg_vs), 4) if msg_vs else 0.0
            values["sim_prev"] = round(float(v @ prev_mean), 4) if prev_mean is not None else 0.0
        out.append(tuple(values[n] for n in names))
    return out


def install(names: list[str], centre: bool = False) -> None:
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise SystemExit(f"unknown --extra features {unknown}: choose from {NAMES}")
    vectors = _Vectors(centre)
    base = rewrite_module.candidate_features
    term_scorer.FEATURES = (*term_scorer.FEATURES, *names)

    @lru_cache(maxsize=512)
    def centrality(words: tuple[str, ...]) -> tuple[float, ...]:
        vs = [vectors.vec(w) for w in words]
        ok = [i for i, v in enumerate(vs) if v is not None]
        out = [0.0] * len(words)
        if len(ok) >= 2:
            m = np.array([vs[i] for i in ok])
            mean = ((m @ m.T).sum(axis=1) - 1.0) / (len(ok) - 1)
            for i, s in zip(ok, mean, strict=True):
                out[i] = round(float(s), 4)
        return tuple(out)

    def wrapped(message, users, replies, carried=()):
        candidates = base(message, users, replies, carried)
        extra = _values(vectors, names, message, users, candidates, centrality)
        return [term_scorer.Candidate(c.word, c.key, (*c.features, *e), c.order)
                for c, e in zip(candidates, extra, strict=True)]

    rewrite_module.candidate_features = wrapped
