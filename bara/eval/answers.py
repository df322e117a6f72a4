"""Reference-based answer scores, answer kinds, and the optional LLM judge.

Pure functions, no state: the same strings always give the same scores.

* :func:`token_f1` -- SQuAD token F1 (Rajpurkar et al., 2016, "SQuAD: 100,000+
  Questions for Machine Comprehension of Text", official evaluation script).
* :func:`rouge_l` -- ROUGE-L F-measure from the longest common subsequence
  (Lin, 2004, "ROUGE: A Package for Automatic Evaluation of Summaries").
* :func:`spearman` -- Spearman's rank correlation (Spearman, 1904), used to
  report how far a judge agrees with the reference-based scores.

Before scoring, :func:`answer_body` strips what the offline generator adds
around its extractive answer (``[n]`` citation marks and the ``Sources:``
list), so only the answer text is compared with the reference.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from bara import prompts as P
from bara.prompts.eval import JUDGE_PROMPT

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_CITATION = re.compile(r"\s*\[\d+\]")
_ABSTAIN = re.compile(
    r"(not in the knowledge base|don't find this in the knowledge base|don't have anything on that"
    r"|(do not|don't) have (that |any |enough )?information|cannot find|can't find|no information (about|on))",
    re.IGNORECASE)
_CANNED = frozenset(" ".join(t.format(name="").split()) for t in P.CHITCHAT.values()) | {P.EMPTY_INPUT}


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and articles, collapse whitespace."""
    text = _ARTICLES.sub(" ", text.lower().translate(_PUNCT))
    return " ".join(text.split())


def answer_body(answer: str) -> str:
    """The answer without the offline generator's ``Sources:`` list and ``[n]`` citation marks."""
    body = answer.split(f"\n{P.SOURCES_HEADER}", 1)[0]
    return _CITATION.sub("", body).strip()


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 (Rajpurkar et al., 2016).

    With ``common`` the multiset intersection of the normalised tokens,
    ``P = |common| / |pred|``, ``R = |common| / |ref|`` and ``F1 = 2PR / (P + R)``.
    Two empty token lists score 1.0; one empty list scores 0.0.
    """
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, O(|a||b|) time, O(|b|) memory)."""
    if not a or not b:
        return 0
    row = [0] * (len(b) + 1)
    for x in a:
        prev_diag = 0
        for j, y in enumerate(b, 1):
            prev_diag, row[j] = row[j], prev_diag + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def rouge_l(prediction: str, reference: str, beta: float = 1.0) -> float:
    """ROUGE-L F-measure (Lin, 2004, section 3.1) on SQuAD-normalised tokens.

    ``R_lcs = LCS / |ref|``, ``P_lcs = LCS / |pred|``,
    ``F_lcs = (1 + beta^2) R P / (R + beta^2 P)``; beta = 1 weighs them equally.
    """
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    lcs = lcs_length(pred, ref)
    if lcs == 0:
        return float(not pred and not ref)
    r, p = lcs / len(ref), lcs / len(pred)
    return (1 + beta ** 2) * r * p / (r + beta ** 2 * p)


def answer_kind(answer: str) -> str:
    """``abstain`` (says the knowledge base lacks it), ``clarify`` (asks the user back), ``canned``
    (a chit-chat template), or ``answer``."""
    flat = " ".join(answer.split())
    if not flat or flat in _CANNED and not flat.endswith("?"):
        return "canned"
    if _ABSTAIN.search(flat) and P.SOURCES_HEADER not in answer:
        return "abstain"
    last = answer_body(answer).rstrip().splitlines()[-1:] or [""]
    if last[0].rstrip().endswith("?") and P.SOURCES_HEADER not in answer:
        return "clarify"
    return "answer"


def rank_average(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    arr = np.asarray(values, dtype=float)
    order = np.argsort(arr, kind="mergesort")
    ranks = np.empty(len(arr))
    ranks[order] = np.arange(1, len(arr) + 1)
    for v in np.unique(arr):
        tied = arr == v
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (Spearman, 1904): Pearson correlation of the average ranks; None if undefined."""
    if len(x) != len(y) or len(x) < 3:
        return None
    rx, ry = rank_average(x), rank_average(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return round(float(np.corrcoef(rx, ry)[0, 1]), 4)


# ---------------------------------------------------------------- optional judge
@dataclass(frozen=True)
class Judgement:
    faithfulness: float | None
    relevance: float | None
    error: str = ""


def parse_judgement(text: str) -> Judgement:
    """The two 1-5 ratings from the judge's reply (the first JSON object in it)."""
    found = re.search(r"\{.*?\}", text or "", re.DOTALL)
    try:
        data = json.loads(found.group(0)) if found else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return Judgement(None, None, "unparseable judge reply")
    return Judgement(_rating(data.get("faithfulness")), _rating(data.get("relevance")))


def _rating(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if 1 <= number <= 5 else None


def judge_answer(model: Any, question: str, passages: Sequence[str], answer: str) -> Judgement:
    """Ask a configured chat model for faithfulness and relevance; provider errors become ``error``."""
    from bara.llm.errors import LLMError
    from bara.messages import UserMessage

    shown = "\n".join(f"[{n}] {p[:800]}" for n, p in enumerate(passages, 1)) or "(none)"
    prompt = JUDGE_PROMPT.format(question=question, passages=shown, answer=answer_body(answer))
    try:
        reply = model.complete([UserMessage(prompt)]).message.text
    except LLMError as exc:
        return Judgement(None, None, type(exc).__name__)
    return parse_judgement(reply)


def judge_agreement(judged: Sequence[tuple[Judgement, float, float]]) -> dict[str, Any]:
    """Spearman agreement of each judge rating with token F1 and ROUGE-L over the judged sample."""
    ok = [(j, f1, rl) for j, f1, rl in judged if j.faithfulness is not None and j.relevance is not None]
    out: dict[str, Any] = {"n": len(judged), "n_rated": len(ok),
                           "errors": dict(Counter(j.error for j, _, _ in judged if j.error))}
    for name in ("faithfulness", "relevance"):
        ratings = [getattr(j, name) for j, _, _ in ok]
        out[f"{name}_mean"] = round(float(np.mean(ratings)), 4) if ratings else None
        out[f"{name}_vs_f1"] = spearman(ratings, [f1 for _, f1, _ in ok])
        out[f"{name}_vs_rouge_l"] = spearman(ratings, [rl for _, _, rl in ok])
    return out
