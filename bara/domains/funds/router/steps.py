"""The rule router's transcript reading and next step: what was asked, what ran, what to call next.

Split from :mod:`bara.domains.funds.router` (which plans a message) so each stays small. A search that comes
back thin (fewer than ``router_thin_min_hits`` hits, or no hit that both retrieval arms agree on) is
reformulated once, in the corpus's vocabulary; "why did it fall" plans search after computing, with a
query that carries the computed figures.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from bara.domains.funds.router import compose as C
from bara.domains.funds.router import parse as T
from bara.domains.funds.router.records import Holdings, SearchHit, Xirr, search_hits
from bara.domains.funds.settings import funds_settings, thin_score
from bara.messages import AssistantMessage, Message, SystemMessage, ToolResultMessage, UserMessage
from bara.settings import Settings

SEARCH = "search_documents"
MAX_COMPARE = 5  # compare_funds' own limit (CompareArgs.schemes max_length), not a tuning constant
_SIGNED_IN = re.compile(r"Signed-in user: (.+?) \(([^)\s]+)\)")


@dataclass(frozen=True)
class Call:
    name: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Seen:
    """A tool call made since the last user message, with the envelope it returned."""

    name: str
    args: Mapping[str, Any]
    result: Mapping[str, Any]

    @property
    def ok(self) -> bool:
        return self.result.get("ok") is True

    @property
    def data(self) -> Mapping[str, Any]:
        data = self.result.get("data")
        return data if isinstance(data, Mapping) else {}

    @property
    def hits(self) -> tuple[SearchHit, ...]:
        """A search's hits as typed records (empty for other tools)."""
        return search_hits(self.data)


@dataclass(frozen=True)
class Turn:
    """What the router reads from a transcript."""

    text: str
    user_name: str
    user_id: str
    seen: tuple[Seen, ...]
    calls_made: int  # tool calls anywhere in the transcript (for fresh call ids)


@dataclass(frozen=True)
class Plan:
    """kind: chitchat | refuse | advice | explain | compare_held | tools | clarify."""

    kind: str
    calls: tuple[Call, ...] = ()
    note: str = ""  # chit-chat kind, refusal reason, or (clarify) the date as the user wrote it
    reasons: tuple[str, ...] = ()
    period: tuple[tuple[str, str], ...] = ()  # dates the user gave that a chosen tool cannot take
    labels: tuple[tuple[str, str], ...] = ()  # (scheme argument, the scheme's name) for codes the router resolved
    funds: tuple[str, ...] = ()  # the schemes a holdings question names (codes, or the words no scheme matched)


# ---------------------------------------------------------------- transcript
def read_turn(messages: Sequence[Message]) -> Turn:
    last = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
    asked_by = messages[last] if last >= 0 else None
    text = asked_by.text if isinstance(asked_by, UserMessage) else ""
    system = "\n".join(m.text for m in messages if isinstance(m, SystemMessage))
    found = _SIGNED_IN.search(system)
    name, uid = (found.group(1), found.group(2)) if found else ("", "")
    tail = messages[last + 1:]
    asked = {c.id: c for m in tail if isinstance(m, AssistantMessage) for c in m.tool_calls}
    seen = tuple(Seen(asked[r.tool_call_id].name, dict(asked[r.tool_call_id].arguments), _envelope(r))
                 for r in tail if isinstance(r, ToolResultMessage) and r.tool_call_id in asked)
    made = sum(len(m.tool_calls) for m in messages if isinstance(m, AssistantMessage))
    return Turn(text, name, uid, seen, made)


def _envelope(result: ToolResultMessage) -> Mapping[str, Any]:
    try:
        value = json.loads(result.content)
    except ValueError:
        return {"ok": False, "error": "unreadable tool result"}
    return value if isinstance(value, Mapping) else {"ok": False, "error": "unexpected tool result"}


# ----------------------------------------------------------------- next step
def next_calls(plan: Plan, seen: Sequence[Seen], offered: set[str],
               settings: Settings | None = None) -> tuple[Call, ...]:
    """The calls to make now; empty means "write the answer"."""
    if not offered:
        return ()
    if not seen:
        return tuple(c for c in plan.calls if c.name in offered)
    follow = _follow_up(plan, seen)
    if follow is not None:
        return (follow,) if follow.name in offered else ()
    return _retry_thin_search(seen, offered, settings or Settings())


def _follow_up(plan: Plan, seen: Sequence[Seen]) -> Call | None:
    names = {s.name for s in seen}
    if plan.kind == "explain":
        compare = None if "compare_funds" in names else _explain_compare(seen)
        if compare is None and SEARCH not in names:
            return Call(SEARCH, {"query": informed_query(seen), "limit": 5})
        return compare
    if plan.kind == "compare_held" and "compare_funds" not in names:
        codes = _held_codes(seen)[:MAX_COMPARE]
        return Call("compare_funds", {"schemes": codes}) if len(codes) >= 2 else None
    return None


def _explain_compare(seen: Sequence[Seen]) -> Call | None:
    """The asked fund's own NAV record, next to up to two of the user's other funds for context."""
    xirr = next((s for s in seen if s.name == "compute_xirr"), None)
    if xirr is None or not xirr.args.get("scheme"):
        return None
    asked = str(xirr.args["scheme"])
    if not xirr.ok and xirr.result.get("code") and not (T.CODE.fullmatch(asked) or T.ISIN.fullmatch(asked)):
        return None  # a phrase that is none of the user's funds: compare_funds would match it to some other fund
    scope = Xirr.read(xirr.data).scope if xirr.ok else None
    target = scope.scheme_code if scope else str(xirr.args["scheme"])
    others = [c for c in _held_codes(seen) if c != target][:2]
    return Call("compare_funds", {"schemes": [target, *others]}) if others else None


def _held_codes(seen: Sequence[Seen]) -> list[str]:
    return [str(h.scheme_code) for s in seen if s.name == "get_holdings" and s.ok
            for h in Holdings.read(s.data).holdings]


def _retry_thin_search(seen: Sequence[Seen], offered: set[str], settings: Settings) -> tuple[Call, ...]:
    searches = [s for s in seen if s.name == SEARCH]
    if len(searches) != 1 or SEARCH not in offered or not is_thin(searches[0], settings):
        return ()
    first = str(searches[0].args.get("query", ""))
    again = T.reformulate(first)
    if not again or again.lower() == first.lower():
        return ()
    return (Call(SEARCH, {"query": again, "limit": int(searches[0].args.get("limit", 5) or 5)}),)


def is_thin(search: Seen, settings: Settings | None = None) -> bool:
    """Fewer than ``router_thin_min_hits`` hits, or none that both arms found (best fused score below
    :func:`~bara.domains.funds.settings.thin_score`)."""
    s = settings or Settings()
    if not search.ok:
        return False  # an argument error is not a thin corpus; the answer reports it
    hits = search.hits
    best = max((h.score for h in hits), default=0.0)
    return len(hits) < funds_settings(s).router_thin_min_hits or best < thin_score(s)


def informed_query(seen: Sequence[Seen]) -> str:
    """A search query that carries what the computation found (name, category, the figure)."""
    facts = C.fall_facts(seen)
    if not facts.name:
        return "why do mutual fund NAVs fall: market decline, drawdown and volatility"
    figure = f" {facts.figure}" if facts.figure else ""
    kind = f" {facts.category}" if facts.category else ""
    return f"why did {facts.name} fall{figure}:{kind} fund NAV decline, drawdown and volatility"
