"""Mutation score per module from mutmut's results (run `make mutate`, or `mutmut run`, first).

Score = killed / (killed + survived + timeout + suspicious): mutants no selected test executes
("no tests") are listed separately, since no test run can kill them; timeouts count as survivors
to stay conservative. Usage: python scripts/mutation_score.py [mutants-dir]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code


def tally(mutants: Path) -> dict[str, Counter]:
    per_file: dict[str, Counter] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        name = str(meta.relative_to(mutants)).removesuffix(".meta")
        per_file[name] = Counter(status_by_exit_code[c] for c in codes.values())
    return per_file


def score(c: Counter) -> float:
    judged = c["killed"] + c["survived"] + c["timeout"] + c["suspicious"]
    return c["killed"] / judged if judged else float("nan")


def main(argv: list[str]) -> None:
    mutants = Path(argv[1] if len(argv) > 1 and not argv[1].endswith(".json") else "mutants")
    per_file = tally(mutants)
    total: Counter = sum(per_file.values(), Counter())
    print(f"{'module':44} {'killed':>7} {'survived':>9} {'no tests':>9} {'other':>6} {'score':>7}")
    for name, c in [*per_file.items(), ("TOTAL", total)]:
        other = sum(c.values()) - c["killed"] - c["survived"] - c["no tests"]
        print(f"{name:44} {c['killed']:7d} {c['survived']:9d} {c['no tests']:9d} {other:6d} {score(c):7.1%}")


if __name__ == "__main__":
    main(sys.argv)
