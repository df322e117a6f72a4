"""Fit the follow-up rewrite's term scorer (``bara.understand.term_scorer``) on DEV halves only.

For every turn after the first of the dev conversations (``bara.eval.rewrite_data.half_of`` ==
"dev") of each shared rewrite set, every candidate word of the earlier turns is a row: its named
features, labelled 1 when its light stem is among the terms the human rewrite adds (the QuReTeC
gold of ``bara.eval.rewrite_metrics``). L2-regularised logistic regression (Newton / IRLS), each
set weighted equally; then the threshold that maximises the mean over sets of dev term F1.
Prints the weights to paste into ``Settings.rewrite_term_weights`` / ``rewrite_term_threshold``.

``--loso`` checks a feature set the way an unseen conversation set would: for each set, fit on the
dev halves of the other three (threshold chosen on theirs) and score its own dev half; ``--drop``
zeroes features (to compare feature sets by that held-out-set F1, not by the fitted sets' own).

``--extra f1,f2`` probes similarity features that need no encoder call (issue 31, round 3 session 9;
bench/criteria/issue31_static_sim.md), from *static* word vectors: the rows of MiniLM's input
embedding table (``embeddings.word_embeddings.weight``), a word's vector the mean of its wordpieces'
rows (``--centre`` subtracts the table's mean row first). Appended to FEATURES for this run only
(the scorer and the rewrite see them through ``scripts/static_sim_probe.py``):

- ``sim_msg``  cos(candidate, mean of the message's content words); 0 when the message has none
- ``sim_max``  max cos(candidate, any content word of the message)
- ``sim_prev`` cos(candidate, mean of the previous user turn's content words)
- ``central``  mean cos(candidate, the history's other candidates): how central it is to the history

``--number plural_ref,plural_clash`` probes pronoun number agreement (round 3 session 10;
bench/criteria/issue31_s10.md; ``scripts/number_probe.py``), appended the same way.

Usage: python scripts/train_rewrite_scorer.py [--data ../shared/data] [--l2 1.0] [--loso] [--drop f1,f2]
       [--extra sim_msg,sim_max,sim_prev,central] [--centre] [--number plural_ref,plural_clash]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from bara.eval.rewrite_data import read_conversations
from bara.eval.rewrite_metrics import added_terms, s_stem, term_counts, term_scores
from bara.understand.rewrite import RewriteRules, history_view, rewrite_query
from bara.types import Utterance
import bara.understand.rewrite as rewrite_module
import bara.understand.term_scorer as term_scorer

SETS = ("cast2019", "cast2020", "cast2022", "canard_dev")


def rows(path: Path, rules):
    """Candidates as the rewrite sees them (its history view, the previous turn's carried words
    computed with ``rules``: the chain depends on the weights, so fitting iterates)."""
    for conv in read_conversations(path):
        if conv.half != "dev":
            continue
        hist: list[Utterance] = []
        for i, t in enumerate(conv.turns):
            if i:
                view = history_view(tuple(hist), rules)
                gold = added_terms(t.rewrite, t.user)
                for c in rewrite_module.candidate_features(t.user, view.users, view.replies, view.carried):
                    yield list(c.features), float(s_stem(c.word.lower()) in gold)
            hist += [Utterance("user", t.user), Utterance("assistant", t.assistant or "")]


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float) -> np.ndarray:
    x = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(x.shape[1])
    reg = l2 * np.eye(x.shape[1])
    reg[0, 0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ beta))
        grad = x.T @ (w * (p - y)) + reg @ beta
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + reg
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def dev_f1(data: Path, weights: dict, threshold: float, sets=SETS) -> dict:
    rules = RewriteRules(term_weights=tuple(sorted(weights.items())), term_threshold=threshold)
    out = {}
    for name in sets:
        counts = []
        for conv in read_conversations(data / "rewrite" / f"{name}.jsonl"):
            if conv.half != "dev":
                continue
            hist: list[Utterance] = []
            for i, t in enumerate(conv.turns):
                if i:
                    counts.append(term_counts(t.user, t.rewrite, rewrite_query(t.user, hist, rules=rules).query))
                hist += [Utterance("user", t.user), Utterance("assistant", t.assistant or "")]
        out[name] = term_scores(counts)["term_f1"]
    return out


def fit_round(args, rules, sets=SETS) -> dict:
    xs, ys, ws = [], [], []
    for name in sets:
        part = list(rows(args.data / "rewrite" / f"{name}.jsonl", rules))
        xs += [r[0] for r in part]
        ys += [r[1] for r in part]
        ws += [1.0 / len(part)] * len(part)
        print(f"{name}: {len(part)} candidates, {int(sum(r[1] for r in part))} positive")
    w = np.array(ws) * len(ws) / len(sets)
    x = np.array(xs)
    features = term_scorer.FEATURES
    dropped = [features.index(f) for f in args.drop]
    x[:, dropped] = 0.0
    beta = fit(x, np.array(ys), w, args.l2)
    weights = {"bias": round(float(beta[0]), 3), **{n: round(float(b), 3) for n, b in zip(features, beta[1:], strict=True)}}
    print(json.dumps(weights))
    return weights


def loso(args) -> None:
    """Leave one set out: fit on the other sets' dev halves, choose the threshold there, score the set."""
    held = {}
    for name in SETS:
        others = tuple(s for s in SETS if s != name)
        weights = fit_round(args, RewriteRules(), others)
        best = max((sum(dev_f1(args.data, weights, t, others).values()) / len(others), t) for t in (0.2, 0.25, 0.3))
        held[name] = dev_f1(args.data, weights, best[1], (name,))[name]
        print(f"held out {name}: threshold {best[1]} (others {best[0]:.4f}) -> {held[name]:.4f}")
    print(f"leave-one-set-out dev term F1 {held} mean {sum(held.values()) / len(held):.4f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("BARA_DATA", "../shared/data")))
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loso", action="store_true")
    ap.add_argument("--drop", type=lambda v: [f for f in v.split(",") if f], default=[])
    ap.add_argument("--extra", type=lambda v: [f for f in v.split(",") if f], default=[])
    ap.add_argument("--centre", action="store_true")
    ap.add_argument("--number", type=lambda v: [f for f in v.split(",") if f], default=[])
    args = ap.parse_args()
    if args.extra:
        import static_sim_probe

        static_sim_probe.install(args.extra, centre=args.centre)
    if args.number:
        import number_probe

        number_probe.install(args.number)
    if args.loso:
        loso(args)
        return
    rules = RewriteRules()
    for _ in range(args.rounds):
        weights = fit_round(args, rules)
        rules = RewriteRules(term_weights=tuple(sorted(weights.items())), term_threshold=rules.term_threshold)
    best = None
    for threshold in np.arange(0.15, 0.46, 0.05):
        f1 = dev_f1(args.data, weights, round(float(threshold), 2))
        mean = sum(f1.values()) / len(f1)
        print(f"threshold {threshold:.2f}: dev term F1 {f1} mean {mean:.4f}")
        if best is None or mean > best[0]:
            best = (mean, round(float(threshold), 2))
    assert best is not None
    print(f"best threshold {best[1]} (mean dev F1 {best[0]:.4f})")


if __name__ == "__main__":
    main()
