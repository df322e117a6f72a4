"""Where the prompt tokens of ``bench/bench_e2e.py`` go: every model call split into its parts, both modes.

The same conversations, settings and back-to-back order as ``bench/bench_e2e.py``, but the model is a
recorder: it answers every call with a fixed short reply and counts what it was sent with the
SmolLM2 tokenizer itself (llama-cpp-python, ``vocab_only``; ``make llm``), in ChatML as the server's
template lays it out. Each call's prompt is split into the fixed head (system text and behaviour
line), the knowledge-base passages, the other context frames (profile, notes, episodes, Q&A, the
history summary line), the history messages, the user message, and ``template``: the rest of the exact count of the whole
rendered prompt (ChatML role markers, the blank lines between frames and between a passage's paragraphs).
``passages`` counts the knowledge items a call showed.

No server runs, so this takes seconds; the totals are checked against a real run's rows file
(``--rows`` of ``bench_e2e.py``) when one is given. Only an inserted small-talk turn's stored answer
differs from a real run (the recorder's fixed reply instead of the model's), so later turns' history
differs by a few tokens there.

Usage:  python bench/bench_e2e_breakdown.py [--conversations 24] [--real-rows rows.jsonl] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_e2e import K, MODES, conversations  # noqa: E402

from bara import prompts as P  # noqa: E402
from bara.app import Bara  # noqa: E402
from bara.eval.ab import cached_index, working_copy  # noqa: E402
from bara.eval.conversation_replay import ReferenceReplies, forget_user, run_conversation  # noqa: E402
from bara.eval.stats import bootstrap_ratio_ci, ratio_of_sums  # noqa: E402
from bara.llm.base import ModelResponse  # noqa: E402
from bara.llm.local import local_gguf  # noqa: E402
from bara.messages import AssistantMessage, Message, SystemMessage, ToolSpec, Usage  # noqa: E402
from bara.turn.gated import Assistant  # noqa: E402
from bara.retrieval.embedders import build_embedder  # noqa: E402
from bara.settings import load_settings  # noqa: E402

PARTS = ("head", "knowledge", "other_context", "history", "user", "template")
_CONTEXT_HEADERS = (P.PROFILE_HEADER, P.NOTES_HEADER, P.EPISODES_HEADER, P.QA_HEADER)
_PASSAGE = re.compile(r"(?:^|\n)\[(\d+)\] ")  # a knowledge item's first line (KNOWLEDGE_ITEM)
REPLY = "I can help with that. Here is a short answer based on what I know about the question asked."


def chatml(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(role, text) as ChatML shows them."""
    out = []
    for m in messages:
        role = "system" if isinstance(m, SystemMessage) else "assistant" if isinstance(m, AssistantMessage) else "user"
        out.append((role, getattr(m, "text", "") or ""))
    return out


def passages(system: str) -> int:
    """How many knowledge items the system text numbers [1], [2], ... (a passage quoting "[7] " is not one)."""
    frame = system.split(P.KNOWLEDGE_HEADER, 1)
    if len(frame) < 2:
        return 0
    n = 0
    for m in _PASSAGE.finditer(frame[1]):
        n += int(m.group(1)) == n + 1
    return n


@dataclass
class Recorder:
    """A Model that answers with ``REPLY`` and splits every prompt it is sent into ``PARTS``."""

    tokenize: Any
    calls: list[dict[str, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "recorder"

    def count(self, text: str) -> int:
        return len(self.tokenize(text.encode("utf-8"), add_bos=False, special=False)) if text else 0

    def split_system(self, text: str) -> dict[str, int]:
        """head / knowledge / other_context of the system message (frames are joined by a blank line;
        the separators are left to ``template``)."""
        parts = {"head": 0, "knowledge": 0, "other_context": 0}
        kind = "head"
        for block in text.split("\n\n"):
            if block.startswith(P.KNOWLEDGE_HEADER):
                kind = "knowledge"
            elif block.startswith(_CONTEXT_HEADERS) or block.startswith(P.HISTORY_SUMMARY.split("{")[0]):
                kind = "other_context"
            parts[kind] += self.count(block)  # a passage's own blank lines keep the frame's kind
        return parts

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                 deadline: float | None = None) -> ModelResponse:
        rows = chatml(messages)
        parts: dict[str, int] = dict.fromkeys(PARTS, 0)
        for i, (role, text) in enumerate(rows):
            if role == "system":
                for k, v in self.split_system(text).items():
                    parts[k] += v
            else:
                parts["user" if i == len(rows) - 1 else "history"] += self.count(text)
        rendered = "".join(f"<|im_start|>{role}\n{text}<|im_end|>\n" for role, text in rows)
        total = len(self.tokenize((rendered + "<|im_start|>assistant\n").encode("utf-8"), add_bos=False,
                                  special=True))
        parts["template"] = total - sum(parts[p] for p in PARTS)  # role markers, separators, merges
        parts["history_messages"] = len(rows) - 2
        parts["passages"] = sum(passages(text) for role, text in rows if role == "system")
        self.calls.append(parts)
        return ModelResponse(AssistantMessage(text=REPLY), Usage(total, self.count(REPLY)))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from llama_cpp import Llama  # pyright: ignore[reportMissingImports]  # make llm installs it

    settings = load_settings().override(k=K)
    vocab = Llama(model_path=str(local_gguf(settings)), vocab_only=True, verbose=False)
    embedder = build_embedder(settings)
    prep, convs = conversations(args.data, args.conversations, settings)
    index = cached_index(args.data / "mtrag" / "corpus.jsonl", prep.docs, settings, embedder)
    recorder, replies = Recorder(vocab.tokenize), ReferenceReplies()
    turns: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bara-e2e-bd-") as tmp:
        run_settings = settings.override(db=str(working_copy(index, Path(tmp))), model="openai:recorder")
        with Bara(run_settings, embedder=getattr(embedder, "inner", embedder)) as bara:
            assistants = {m: Assistant(bara, recorder, mode=m, fallback_offline=False) for m in MODES}
            for a in assistants.values():
                a.hooks.add("before_persist", replies)
            for i, conv in enumerate(convs):
                for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                    user, before = f"bd-{mode}-{i}", len(recorder.calls)
                    try:
                        costs, _ = run_conversation(assistants[mode], replies, conv, user, f"{user}-c")
                    finally:
                        forget_user(assistants[mode], user)
                    calls = recorder.calls[before:]
                    assert len(calls) == len(costs), "one model call per turn expected"
                    for t, (cost, call) in enumerate(zip(costs, calls, strict=True)):
                        turns.append({"conv": i, "task_id": conv.task_id, "turn": t, "mode": mode,
                                      "inserted": cost.inserted, "searched": cost.kb_searched, **call})
    return summarise(turns, args.real_rows)


def summarise(turns: list[dict[str, Any]], real_rows: Path | None) -> dict[str, Any]:
    totals = {m: {p: sum(t[p] for t in turns if t["mode"] == m) for p in PARTS} for m in MODES}
    for m in MODES:
        totals[m]["all"] = sum(totals[m][p] for p in PARTS)
    per_conv: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(MODES, 0))
    for t in turns:
        per_conv[t["task_id"]][t["mode"]] += sum(t[p] for p in PARTS)
    ids = sorted(per_conv)
    g, a = [per_conv[i]["gated"] for i in ids], [per_conv[i]["always"] for i in ids]
    out: dict[str, Any] = {"conversations": len(ids), "turns_per_mode": sum(t["mode"] == "gated" for t in turns),
                           "totals": totals, "ratio": round(ratio_of_sums(g, a), 4),
                           "ci95": [round(v, 4) for v in bootstrap_ratio_ci(g, a)]}
    # The ratio if a part were sent by neither mode (what each part costs the ratio).
    out["ratio_without"] = {p: round((totals["gated"]["all"] - totals["gated"][p])
                                     / (totals["always"]["all"] - totals["always"][p]), 4) for p in PARTS}
    groups: dict[str, dict[str, int]] = defaultdict(lambda: {"turns": 0, "gated": 0, "always": 0})
    paired = {(t["conv"], t["turn"], t["mode"]): t for t in turns}
    for (c, n, mode), t in paired.items():
        if mode != "gated":
            continue
        other = paired[(c, n, "always")]
        key = ("inserted" if t["inserted"] else "original") + ("+searched" if t["searched"] else "+skipped")
        groups[key]["turns"] += 1
        groups[key]["gated"] += sum(t[p] for p in PARTS)
        groups[key]["always"] += sum(other[p] for p in PARTS)
    out["by_turn_kind"] = dict(groups)
    if real_rows:
        real = [json.loads(line) for line in real_rows.read_text(encoding="utf-8").splitlines() if line.strip()]
        out["vs_real"] = [{"task_id": r["task_id"], "mode": r["mode"], "real": r["prompt_tokens"],
                           "recorded": per_conv[r["task_id"]][r["mode"]]} for r in real if r["task_id"] in per_conv]
    out["per_conversation"] = [{"task_id": i, **per_conv[i]} for i in ids]
    out["turns"] = turns
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=24)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("BARA_DATA", "../shared/data")))
    parser.add_argument("--real-rows", type=Path, default=None, help="a bench_e2e.py rows file to compare with")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = run(args)
    if args.json:
        print(json.dumps(out))
        return
    for m in MODES:
        print(m, " ".join(f"{k}={v}" for k, v in out["totals"][m].items()))
    print(f"ratio {out['ratio']} ci95 {out['ci95']}; without each part: {out['ratio_without']}")
    for k, v in sorted(out["by_turn_kind"].items()):
        print(k, v)


if __name__ == "__main__":
    main()
