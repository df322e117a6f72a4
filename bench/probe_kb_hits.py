"""The gated mode's knowledge hits on every turn of the mixed dev conversations, for choosing a cut.

Runs ``make eval-mixed``'s conversations (MTRAG-UN dev tasks, 30% CLINC150 small talk, same rate and seed)
through the gated assistant only, as ``bara eval ab --turns all`` does, and writes one JSON line per user
turn: the task, its half (``bara.eval.calibrate.half_of``: sha256 of the conversation id even = tune), whether
it was inserted or judged, and each knowledge hit shown (passage id, cosine, fused score, arm ranks,
estimated tokens) with, on the judged turn, the reference passages. A cut rule can then be replayed on the
tune half without rerunning the conversations (``--settings KEY=VALUE`` runs them under other settings).

Usage:  python bench/probe_kb_hits.py --out hits.jsonl [--limit N] [--half tune|report|all] [--settings gate_kb_agreement_ratio=0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bara.app import Bara
from bara.eval.ab import cached_index, prepare, working_copy
from bara.eval.calibrate import half_of
from bara.eval.conversation_replay import ReferenceReplies, forget_user
from bara.eval.mixing import MixConfig, mix_conversations
from bara.prompts.frames import estimate_tokens
from bara.retrieval.embedders import build_embedder
from bara.settings import load_settings
from bara.turn.gated import Assistant


def hit_row(hit, tokens: dict[str, int]) -> dict:
    return {"id": hit.source, "cos": hit.score, "fused": hit.fused, "lex": hit.lexical_rank,
            "dense": hit.dense_rank, "tok": tokens.get(hit.source, 0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--half", choices=("tune", "report", "all"), default="tune",
                    help="which half of the conversations to run (tune: sha256 even; the default)")
    ap.add_argument("--settings", nargs="*", default=[], help="KEY=VALUE overrides (numbers parsed as JSON)")
    a = ap.parse_args()
    over = {k: json.loads(v) for k, v in (s.split("=", 1) for s in a.settings)}
    settings = load_settings().override(k=4, **over)
    embedder = build_embedder(settings)
    corpus = a.data / "mtrag" / "corpus.jsonl"
    prep = prepare(a.data / "mtrag" / "tasks.dev.jsonl", corpus, a.limit)
    mix = MixConfig(a.data / "clinc150" / "val.jsonl", a.data / "clinc150" / "domains.json", 0.3, 20261130)
    convs = {c.task_id: c for c in mix_conversations(prep.tasks, mix)}
    index = cached_index(corpus, prep.docs, settings, embedder)
    with tempfile.TemporaryDirectory(prefix="bara-probe-") as tmp, a.out.open("w", encoding="utf-8") as out:
        with Bara(settings.override(db=str(working_copy(index, Path(tmp)))),
                  embedder=getattr(embedder, "inner", embedder)) as bara:
            assistant, replies = Assistant(bara, model=None, mode="gated"), ReferenceReplies()
            assistant.hooks.add("before_persist", replies)
            tokens = {d.id: estimate_tokens(f"{d.title}\n{d.text}") for d in prep.docs}
            for n, task in enumerate(prep.tasks):
                if a.half != "all" and half_of(task) != a.half:
                    continue
                user, cid = f"probe-{n}", f"probe-{n}-c"
                assistant.open_conversation(user, cid, create=True)
                conv = convs[task.id]
                try:
                    for i, turn in enumerate(conv.turns):
                        replies.next = turn.reference_reply
                        result = assistant.turn(user, turn.text, conversation_id=cid)
                        replies.next = ""
                        tr, last = result.trace, i == len(conv.turns) - 1
                        hits = [hit_row(h, tokens) for h in tr.hits]
                        out.write(json.dumps({
                            "task": task.id, "half": half_of(task), "turn": i, "inserted": turn.inserted,
                            "judged": last, "route": tr.route, "tokens": tr.context_tokens, "hits": hits,
                            "reasons": [r for r in tr.reasons if r.startswith(("kb:", "topic:", "history:"))],
                            "relevant": list(task.relevant) if last else [],
                            "answerability": task.answerability if last else ""}) + "\n")
                finally:
                    forget_user(assistant, user)
                if n % 50 == 0:
                    print(f"{n}/{len(prep.tasks)}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
