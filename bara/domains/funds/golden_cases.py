"""The golden set of the portfolio assistant (``bara eval golden``), as JSONL data files.

Cases live in ``bara/domains/funds/data/golden_<split>.jsonl``, one JSON object a line:
``{"id", "category", "user", "message", "expect"}``, checked on load by :func:`parse_cases`
(fields and their types, known categories and ``expect`` keys, the key each category is scored on,
ids unique across both splits).

* ``dev``: the cases the offline router was tuned on (the original 52 plus
  paraphrases written while improving it).
* ``test``: written from the user's side *before* the router was changed to
  generalise (varied phrasings, typos, Hinglish mixes) and never used for
  tuning; report it next to dev, never fold it in.

Placeholders ``{key}`` or ``{key:user}`` in ``user``, ``message`` and ``expect``
are filled at run time from the loaded AMFI data by :class:`bara.domains.funds.golden.Facts`,
with plain SQL; expected figures are computed the same independent way, never by
the tools under test. Relevant FiQA passages (MTRAG corpus, ``fiqa`` collection)
were chosen by reading them, not by what search returned.

Categories are scored separately: ``numeric`` (every expected figure appears in
the answer, within its tolerance), ``retrieval`` (search_documents returned a
relevant passage), ``refusal`` (declined, nothing of another user shown, no
recommendation), ``tool_selection`` (the right tool, and not search for the
user's own figures).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from bara.errors import InputError
from bara.datafiles import json_lines

SPLITS = ("dev", "test")
CATEGORIES = ("numeric", "retrieval", "refusal", "tool_selection")
_FIELDS = {"id": str, "category": str, "user": str, "message": str, "expect": dict}
#: What ``expect`` may say (see :mod:`bara.domains.funds.golden_checks`), and what each category needs.
EXPECT_KEYS = frozenset({"figures", "sources", "refusal", "none", "any_of", "forbid", "before", "args"})
_NEEDS = {"numeric": "figures", "retrieval": "sources", "refusal": "refusal"}


def parse_cases(text: str, name: str, split: str) -> tuple[dict[str, Any], ...]:
    """The cases of one JSONL text, each tagged with ``split``; InputError naming the line when one is malformed."""
    out = []
    for n, row in json_lines(text.splitlines(), name, "fix the data file"):
        problem = _problem(row)
        if problem:
            raise InputError(f"{name} line {n}: {problem}")
        out.append({**row, "split": split})
    return tuple(out)


def _problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return "a case must be a JSON object"
    missing = [f for f in _FIELDS if f not in row]
    if missing:
        return f"lacks {missing}; every case needs {list(_FIELDS)}"
    wrong = [f for f, kind in _FIELDS.items() if not isinstance(row[f], kind)]
    if wrong:
        return f"{wrong} must be {[_FIELDS[f].__name__ for f in wrong]}"
    if row["category"] not in CATEGORIES:
        return f"category {row['category']!r} is not one of {', '.join(CATEGORIES)}"
    unknown = sorted(set(row["expect"]) - EXPECT_KEYS)
    if unknown:
        return f"expect has unknown keys {unknown}; known: {sorted(EXPECT_KEYS)}"
    need = _NEEDS.get(row["category"])
    if need and need not in row["expect"]:
        return f"a {row['category']} case needs expect.{need}"
    if row["category"] == "tool_selection" and not set(row["expect"]) & {"none", "any_of", "forbid", "args", "before"}:
        return "a tool_selection case needs expect.none, any_of, forbid, args or before"
    return None


def load_split(split: str) -> tuple[dict[str, Any], ...]:
    """The cases of one split (``dev`` or ``test``), in file order, each tagged with ``split``."""
    if split not in SPLITS:
        raise InputError(f"golden split {split!r} is unknown; use one of {', '.join(SPLITS)} (or 'all')")
    name = f"golden_{split}.jsonl"
    text = resources.files("bara.domains.funds").joinpath("data", name).read_text(encoding="utf-8")
    return parse_cases(text, name, split)


def unique_ids(cases: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """``cases`` unchanged, or InputError naming an id used twice (results are keyed by id)."""
    seen: set[str] = set()
    for case in cases:
        if case["id"] in seen:
            raise InputError(f"golden case id {case['id']!r} is used twice; ids must be unique across splits")
        seen.add(case["id"])
    return cases


def cases_for(split: str = "all") -> tuple[dict[str, Any], ...]:
    """``dev``, ``test`` or ``all`` (dev then test)."""
    return tuple(c for s in (SPLITS if split == "all" else (split,)) for c in load_split(s))


DEV = load_split("dev")
TEST = load_split("test")
CASES = unique_ids(DEV + TEST)
