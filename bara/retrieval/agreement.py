"""How many knowledge passages a gated turn shows: the hits both retrievers vouch for, and few others.

Pure: reads the scores a hybrid search already computed (:class:`bara.types.Hit`), never searches.
"""

from __future__ import annotations

from dataclasses import replace

from bara.types import Hit, RetrievalOutcome

#: The reason code of the cut (``kb:single_arm_cut:N`` in the turn trace): N hits dropped.
REASON = "single_arm_cut"


def kept_by_agreement(hits: tuple[Hit, ...], ratio: float, keep: int, spare_lexical: int) -> tuple[Hit, ...]:
    """The hits, in their order, without those only one arm vouches for when the best hit has both.

    Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009) scores a hit
    ``w_l / (c + r_l) + w_d / (c + r_d)`` over the arms that returned it (c = ``rrf_k``, 60), so the fused
    scores of a short list are close to bimodal: a hit both arms rank near the top scores about
    ``2 / (c + 1)``, one that a single arm returned at most ``1 / (c + 1)``, half as much, whatever its rank
    there. That split is the one multiple-evidence combination says matters: relevant documents are
    retrieved by several systems more often than non-relevant ones are (Lee, SIGIR 1997; the "chorus
    effect" of Vogt & Cottrell, Information Retrieval 1999). So past the first ``keep`` hits, a hit is
    dropped when its fused score is below ``ratio`` x the best hit's, unless the full-text arm ranked it
    within its first ``spare_lexical`` (a chunk that arm puts at the top has evidence of its own, as the
    cosine floor's spare has it). The cut is relative: when no hit has both arms behind it (one arm found
    nothing, or the arms disagree on everything), every ratio stays near 1 and nothing is dropped.
    Reranked hits (a ``rerank_score``) are ordered by other evidence and kept as they are.
    """
    if ratio <= 0.0 or len(hits) <= keep or any(h.rerank_score is not None for h in hits):
        return hits
    best = max(h.fused for h in hits)
    return tuple(h for i, h in enumerate(hits)
                 if i < keep or h.fused >= ratio * best
                 or (h.lexical.rank is not None and h.lexical.rank <= spare_lexical))


def agreement_cut(kb: RetrievalOutcome | None, ratio: float, keep: int,
                  spare_lexical: int) -> RetrievalOutcome | None:
    """``kb`` with :func:`kept_by_agreement`'s hits; the reason ``single_arm_cut:N`` says how many went
    (they are not counted in ``n_dropped``, which counts the similarity floor's)."""
    if kb is None or not kb.hits:
        return kb
    kept = kept_by_agreement(kb.hits, ratio, keep, spare_lexical)
    if len(kept) == len(kb.hits):
        return kb
    return replace(kb, hits=kept, reasons=kb.reasons + (f"{REASON}:{len(kb.hits) - len(kept)}",))
