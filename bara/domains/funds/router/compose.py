"""What the rule router writes: the answer for a plan from the tool results it saw.

Kept apart from :mod:`bara.domains.funds.router` so wording changes without touching routing.
Answer templates copy figures from tool results verbatim (formatting only: separators, signs,
two decimals); no figure is computed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from bara.domains.funds import prompts as P
from bara.domains.funds.prompts import (ADVICE, ADVICE_NO_FACTS, BY_LABEL, CHITCHAT, FAILED,  # noqa: F401
                                       LABELS, NO_EXPENSE, NOTHING, REFUSALS, RETRIED)  # wording lives there
from bara.domains.funds.router.records import (FundFigures, Holdings, SchemeRef, Xirr, compared_funds,
                                               search_hits)
from bara.llm.offline import extractive_answer
from bara.prompts.frames import Source

# -------------------------------------------------------------- answers: wording
MAX_TX_LINES = 12  # presentation: the reply lists the latest 12 and says so; the tool returns all
#: What the passages quoted for a "why did it fall" answer should be about.
EXPLAIN_FOCUS = "why it fell: decline, loss, drawdown, volatility, trailing returns, market risk"


def compose(plan: Any, turn: Any) -> str:
    """The answer for ``plan`` from the tool results in ``turn.seen``."""
    name = f" {turn.user_name}" if turn.user_name else ""
    if plan.kind == "chitchat":
        return CHITCHAT.get(plan.note, CHITCHAT["acknowledgement"]).format(name=name)
    if plan.kind == "refuse":
        return REFUSALS.get(plan.note, REFUSALS["out_of_scope"]).format(name=f", {turn.user_name}" if name else "")
    if plan.kind == "clarify":
        template = P.DATE_AMBIGUOUS if "router:date_ambiguous" in plan.reasons else P.DATE_UNREADABLE
        return template.format(date=plan.note)
    shown = [s for s in _collapse(turn.seen) if plan.kind != "explain" or s.name != "get_holdings"]
    focus = EXPLAIN_FOCUS if plan.kind == "explain" else turn.text
    body = [line for s in shown for line in (_held(s, plan.funds, dict(plan.labels)) if s.name == "get_holdings" and
                                             s.ok and plan.funds else describe(s, focus, dict(plan.labels)))]
    body += _retry_note(turn.seen)
    body += _period_note(plan.period, [s.name for s in shown if s.ok])
    if plan.kind == "advice":
        return "\n".join([ADVICE, *(body or [ADVICE_NO_FACTS])])
    return "\n".join(body) if body else NOTHING


def _collapse(seen: Sequence[Any]) -> list[Any]:
    """Keep the best search (most hits, later wins ties) and note a retry; other results in order."""
    searches = [s for s in seen if s.name == "search_documents" and s.ok]
    best = max(reversed(searches), key=lambda s: len(search_hits(s.data)), default=None)
    return [s for s in seen if s.name != "search_documents" or s is best or not s.ok]


def _retry_note(seen: Sequence[Any]) -> list[str]:
    queries = [str(s.args.get("query", "")) for s in seen if s.name == "search_documents"]
    return [RETRIED.format(first=queries[0], again=queries[-1])] if len(queries) > 1 else []


def describe(seen: Any, text: str, labels: Mapping[str, str] | None = None) -> list[str]:
    if not seen.ok:
        what, error = LABELS.get(seen.name, seen.name), seen.result.get("error", "unknown error")
        if seen.result.get("code") in P.NOT_HELD and seen.args.get("scheme"):
            asked = str(seen.args["scheme"])
            return [P.NOT_HELD[seen.result["code"]].format(fund=(labels or {}).get(asked, asked), what=what,
                                                          error=error)]
        return [FAILED.format(what=what, error=error)]
    formatter = _FORMATTERS.get(seen.name)
    return formatter(seen.data, text) if formatter else [str(dict(seen.data))]


def _period_note(period: Sequence[tuple[str, str]], used: Sequence[str]) -> list[str]:
    """Say that a date the user gave was not applied, for each answered tool that takes no dates."""
    if not period:
        return []
    start, end = dict(period).get("from_date"), dict(period).get("to_date")
    shape = "until" if start is None else "since" if end is None else "on" if start == end else "range"
    when = P.PERIOD[shape].format(start=start, end=end)
    return [P.NO_PERIOD[n].format(when=when) for n in dict.fromkeys(used) if n in P.NO_PERIOD]


def money(x: Any) -> str:
    return f"INR {x:,.2f}" if isinstance(x, (int, float)) else "n/a"


def pct(x: Any) -> str:
    return f"{x:+.2f}%" if isinstance(x, (int, float)) else "n/a"


def _holdings(data: Mapping[str, Any], text: str) -> list[str]:
    d = Holdings.read(data)
    if not d.holdings:
        return [d.note if d.note is not None else P.NO_HOLDINGS]
    lines = [P.HOLDINGS_HEAD.format(as_of=d.as_of)]
    lines += [_holding_line(h) for h in d.holdings]
    t = d.totals
    lines.append(P.HOLDINGS_TOTAL.format(value=money(t.get('current_value')), invested=money(t.get('invested')),
                                         gain=money(t.get('gain')), gain_pct=pct(t.get('gain_pct'))))
    return lines


def _holding_line(h: Any) -> str:
    return P.HOLDING_LINE.format(scheme=h.scheme, code=h.scheme_code, units=h.units, nav=h.nav,
                                 value=money(h.current_value), invested=money(h.invested), gain=money(h.gain),
                                 gain_pct=pct(h.gain_pct))


def _held(seen: Any, funds: Sequence[str], labels: Mapping[str, str]) -> list[str]:
    """A holdings answer for the funds the question names: their lines, a line for each one not held, and
    how many other holdings are left out (the whole list is one "show my holdings" away)."""
    d = Holdings.read(seen.data)
    asked = [h for h in d.holdings if h.scheme_code in funds]
    missing = [f for f in funds if f not in {h.scheme_code for h in d.holdings}]
    lines = [P.HOLDINGS_HEAD.format(as_of=d.as_of)] if asked else []
    lines += [_holding_line(h) for h in asked]
    lines += [P.NOT_HELD_HOLDING.format(fund=labels.get(f, f)) for f in missing]
    others = len(d.holdings) - len(asked)
    shown = P.HOLDINGS_OTHERS.format(n=others, other="other " if asked else "", s="" if others == 1 else "s",
                                     are="is" if others == 1 else "are")
    return lines + ([shown] if others else [])


def _xirr(data: Mapping[str, Any], text: str) -> list[str]:
    d = Xirr.read(data)
    what = f"{d.scope.scheme} ({d.scope.scheme_code})" if d.scope else P.PORTFOLIO
    if d.xirr_pct is None and d.absolute_return_pct is not None:
        return [P.XIRR_SHORT.format(what=what, days=d.span_days, pct=pct(d.absolute_return_pct), as_of=d.as_of,
                                    invested=money(d.total_invested), redeemed=money(d.total_redeemed),
                                    value=money(d.current_value))]
    if d.xirr_pct is None:
        return [P.XIRR_NONE.format(what=what, reason=d.reason)]
    lines = [P.XIRR.format(what=what, xirr=pct(d.xirr_pct), as_of=d.as_of, count=d.transactions,
                           first=d.first_transaction, invested=money(d.total_invested),
                           redeemed=money(d.total_redeemed), value=money(d.current_value))]
    return lines + ([str(d.caution)] if d.caution else [])


def _transactions(d: Mapping[str, Any], text: str) -> list[str]:
    rows = list(d.get("transactions") or [])
    scope = P.TX_SCOPE.format(scheme=d['scheme']['scheme']) if isinstance(d.get("scheme"), Mapping) else ""
    if not rows:
        return [P.NO_TRANSACTIONS.format(scope=scope)]
    shown = rows[-MAX_TX_LINES:]
    head = P.TX_HEAD.format(count=d.get('count'), scope=scope,
                            tail=P.TX_HEAD_RECENT if len(shown) < len(rows) else P.TX_HEAD_ALL)
    return [head] + [P.TX_LINE.format(date=t['date'], kind=t['kind'], amount=money(t['amount']), scheme=t['scheme'],
                                      units=t['units'], nav=t['nav']) for t in shown]


def _allocation(d: Mapping[str, Any], text: str) -> list[str]:
    rows = d.get("allocation") or []
    if not rows:
        return [P.NO_ALLOCATION]
    by = d.get('by')
    label = BY_LABEL.get(by, by) if isinstance(by, str) else by
    lines = [P.ALLOCATION_HEAD.format(by=label, value=money(d.get('total_value')), as_of=d.get('as_of'))]
    return lines + [P.ALLOCATION_LINE.format(group=r['group'], value=money(r['value']), pct=r['pct']) for r in rows]


def _compare(d: Mapping[str, Any], text: str) -> list[str]:
    lines = [P.COMPARE_HEAD]
    for f in compared_funds(d):
        lines.append(P.COMPARE_LINE.format(
            scheme=f.scheme, code=f.scheme_code, category=f.category, house=f.fund_house,
            returns=", ".join(f"{k} {pct(v)}" for k, v in f.returns_pct.items()), vol=f.volatility_1y_pct,
            drawdown=f.max_drawdown_1y_pct, peak=f.drawdown_peak, trough=f.drawdown_trough,
            nav=f.nav, nav_date=f.nav_date))
    return lines + ([NO_EXPENSE] if "expense" in text.lower() else [])


def _search(d: Mapping[str, Any], text: str) -> list[str]:
    hits = search_hits(d)
    if not hits:
        return [P.NO_DOCUMENTS.format(query=d.get('query'))]
    sources = [Source(n, 0, h.source, "", h.title, h.text, h.score) for n, h in enumerate(hits[:3], start=1)]
    focus = text if text == EXPLAIN_FOCUS else f"{text} {d.get('query') or ''}"
    return [P.DOCUMENTS_HEAD, extractive_answer(focus, sources, 3)]


_FORMATTERS = {"get_holdings": _holdings, "compute_xirr": _xirr, "get_transactions": _transactions,
               "asset_allocation": _allocation, "compare_funds": _compare, "search_documents": _search}


# ------------------------------------------------------------ facts for a "why" query
@dataclass(frozen=True)
class FallFacts:
    name: str = ""
    category: str = ""
    figure: str = ""


def fall_facts(seen: Iterable[Any]) -> FallFacts:
    """The fund a "why did it fall" question is about, with the figures computed for it."""
    seen = list(seen)
    ok = {s.name: s for s in seen if s.ok}
    xirr = Xirr.read(ok["compute_xirr"].data if "compute_xirr" in ok else {})
    scope = xirr.scope
    asked = next((str(s.args["scheme"]) for s in seen if s.name == "compute_xirr" and s.args.get("scheme")), "")
    funds = compared_funds(ok["compare_funds"].data) if "compare_funds" in ok else ()
    row = _target_row(funds, scope, asked)
    parts = [f"1Y return {pct(row.return_1y)}, max drawdown {row.max_drawdown_1y_pct}%"] if row else []
    if scope and xirr.xirr_pct is not None:
        parts.append(f"your XIRR {pct(xirr.xirr_pct)}")
    name = str((row.scheme if row else scope.scheme if scope else None) or asked)
    return FallFacts(name, _short_category(str(row.category)) if row else "", ", ".join(parts))


def _target_row(funds: Sequence[FundFigures], scope: SchemeRef | None, asked: str) -> FundFigures | None:
    """The asked fund's row (it is listed first when it was asked by name), else the weakest 1Y return."""
    if not funds:
        return None
    if scope:
        return next((f for f in funds if f.scheme_code == scope.scheme_code), None)
    if asked:
        return funds[0]
    ranked = [f for f in funds if f.return_1y is not None] or funds
    return min(ranked, key=lambda f: f.return_1y or 0.0)


def _short_category(category: str) -> str:
    """"Equity Scheme - Sectoral/ Thematic" -> "Sectoral/ Thematic"."""
    return category.split(" - ", 1)[-1].strip()

