"""Markdown tables of `make eval-rewrite`'s output (docs/eval/rewrite.json), as docs/rewrite.md shows them.

One table per set: every system's term F1 (precision / recall) on the dev half, the test half and all
turns, and Recall@k where the set has a pooled corpus; the heading gives the turns after each
conversation's first and the share of turns the gate searched. Printed to stdout, so the doc's tables
come from the file the evaluation wrote and never from hand copying.

Usage: python scripts/rewrite_tables.py [docs/eval/rewrite.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TITLES = {"cast2019": "TREC CAsT 2019 (user turns only)", "cast2020": "TREC CAsT 2020 (with the organisers' T5 `peer`)",
          "cast2022": "TREC CAsT 2022 (replies + pooled corpus)", "canard_dev": "CANARD dev (QuAC answers as replies)"}
PARTS = ("dev", "test", "all")
ORDER = ("bara", "raw", "last2", "first_last", "human", "peer")  # then any other system, by name


def _part(result: dict, part: str) -> dict:
    return result if part == "all" else result["halves"][part]


def _f1(m: dict) -> str:
    return f"{m['term_f1']:.3f} ({m['term_precision']:.2f} / {m['term_recall']:.2f})"


def table(name: str, result: dict) -> str:
    """The heading line and the table of one set."""
    k = result.get("k", 5)
    recall = f"recall@{k}"
    has_recall = recall in result["systems"]["bara"]
    turns = " / ".join(f"{p} {_part(result, p)['n_turns']}" for p in PARTS)
    searched = " / ".join(f"{p} {_part(result, p)['systems']['bara']['searched']:.3f}" for p in PARTS)
    lines = [f"**{TITLES.get(name, name)}** — turns after the first: {turns}; gate searched: {searched}", ""]
    head = ["system", *(f"{p} F1 (P / R)" for p in PARTS), *((f"{p} R@{k}" for p in PARTS) if has_recall else ())]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    systems = result["systems"]
    for system in [*(s for s in ORDER if s in systems), *sorted(set(systems) - set(ORDER))]:
        cells = [f"`{system}`", *(_f1(_part(result, p)["systems"][system]) for p in PARTS)]
        if has_recall:
            cells += [f"{_part(result, p)['systems'][system].get(recall, float('nan')):.3f}" for p in PARTS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    path = Path(argv[0] if argv else "docs/eval/rewrite.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    print("\n\n".join(table(name, data[name]) for name in TITLES if name in data))


if __name__ == "__main__":
    main(sys.argv[1:])
