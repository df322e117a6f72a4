"""The golden set of the portfolio assistant (``bara eval golden``), as JSONL data files.

Cases live in ``bara/domains/funds/data/golden_<split>.jsonl``, one JSON object a line:
``{"id", "category", "user", "message", "expect"}``.

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

import json
from importlib import resources
from typing import Any

from bara.errors import InputError

SPLITS = ("dev", "test")
_FIELDS = ("id", "category", "user", "message", "expect")


def load_split(split: str) -> tuple[dict[str, Any], ...]:
    """The cases of one split (``dev`` or ``test``), in file order, each tagged with ``split``."""
    if split not in SPLITS:
        raise InputError(f"golden split {split!r} is unknown; use one of {', '.join(SPLITS)} (or 'all')")
    text = resources.files("bara.domains.funds").joinpath("data", f"golden_{split}.jsonl").read_text(encoding="utf-8")
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"golden_{split}.jsonl line {n} is not JSON ({exc}); fix the data file") from exc
        missing = [f for f in _FIELDS if f not in row]
        if missing:
            raise InputError(f"golden_{split}.jsonl line {n} lacks {missing}; every case needs {list(_FIELDS)}")
        out.append({**row, "split": split})
    return tuple(out)


def cases_for(split: str = "all") -> tuple[dict[str, Any], ...]:
    """``dev``, ``test`` or ``all`` (dev then test)."""
    return tuple(c for s in (SPLITS if split == "all" else (split,)) for c in load_split(s))


DEV = load_split("dev")
TEST = load_split("test")
CASES = DEV + TEST
