"""Short factual texts to index for ``search_documents``.

One text per scheme with NAV history, written only from loaded data (AMFI
scheme master + NAVs, and :mod:`bara.domains.funds.metrics`), plus the
finance passages of the FiQA collection (MTRAG corpus). Each document is a
``(source, title, text)`` triple; the caller chunks, embeds and stores it.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any, Iterator

from bara.domains.funds import metrics
from bara.domains.funds.repo import FundsRepo, NavSeries, Scheme
from bara.datafiles import json_lines, read_lines
from bara.errors import InputError

FIQA_COLLECTION = "fiqa"
FactDoc = tuple[str, str, str]


def scheme_fact_documents(runner: Any) -> list[FactDoc]:
    """A fact sheet per scheme with at least one NAV, ordered by scheme code."""
    repo = FundsRepo(runner)
    series = repo.all_nav_series()
    schemes = repo.schemes(series)
    return [(f"amfi/scheme/{code}", schemes[code].name, scheme_fact_text(schemes[code], s))
            for code, s in series.items() if code in schemes]


def scheme_fact_text(scheme: Scheme, series: NavSeries) -> str:
    """The fact sheet of one scheme: identity, NAV span, trailing returns and risk, all from data."""
    dates, navs = series.dates, series.navs
    isin = f"; ISIN {scheme.isin_growth}" if scheme.isin_growth else ""
    parts = [
        f"{scheme.name} (AMFI scheme code {scheme.code}{isin}) is managed by {scheme.fund_house}. "
        f"AMFI category: {scheme.category or 'not given'} (asset class: {scheme.category_group}). "
        f"Plan: {scheme.plan}; option: {scheme.option}.",
        f"NAV history here: {len(navs)} NAVs from {dates[0]} to {dates[-1]}; latest NAV "
        f"INR {navs[-1]:.4f} on {dates[-1]}.",
        _returns_sentence(dates, navs),
        _risk_sentence(dates, navs),
        "AMFI NAV data does not include an expense ratio for this scheme.",
    ]
    return " ".join(p for p in parts if p)


def _returns_sentence(dates: tuple[date, ...], navs: tuple[float, ...]) -> str:
    returns = metrics.trailing_returns(dates, navs)
    shown = [f"{k} {100 * v:+.2f}%" for k, v in returns.items() if v is not None]
    missing = [k for k, v in returns.items() if v is None]
    if not shown:
        return "Trailing returns: not available (NAV history too short)."
    tail = f" ({', '.join(missing)}: history too short)" if missing else ""
    return f"Trailing returns to {dates[-1]} (absolute, point-to-point): {', '.join(shown)}{tail}."


def _risk_sentence(dates: tuple[date, ...], navs: tuple[float, ...]) -> str:
    start = metrics.since(dates, metrics.months_back(dates[-1], 12))
    vol = metrics.annualised_volatility(navs[start:])
    drawdown = metrics.max_drawdown(navs[start:])
    if vol is None or drawdown is None:
        return ""
    return (f"Over the last year: annualised volatility {100 * vol:.2f}% (daily log returns), "
            f"maximum drawdown {100 * drawdown.depth:.2f}% ({dates[start + drawdown.peak]} to "
            f"{dates[start + drawdown.trough]}).")


def fiqa_documents(corpus_path: str | Path) -> list[FactDoc]:
    """The FiQA passages of an MTRAG ``corpus.jsonl`` (``{_id, title, text, collection}`` per line)."""
    path = Path(corpus_path).expanduser()
    if not path.is_file():
        raise InputError(f"MTRAG corpus not found: {path}. Whoever builds the index must pass the path of "
                         "corpus.jsonl (e.g. <data>/mtrag/corpus.jsonl).")
    return [(f"fiqa/{rec['_id']}", _fiqa_title(rec), rec["text"].strip())  # json_lines: no lone surrogates
            for rec in _records(path) if rec.get("collection") == FIQA_COLLECTION
            and isinstance(rec.get("text"), str) and rec["text"].strip()]


def _records(path: Path) -> Iterator[dict[str, Any]]:
    for number, rec in json_lines(read_lines(path, "MTRAG corpus"), str(path), "fix or replace the corpus file"):
        if not isinstance(rec, dict) or "_id" not in rec:
            raise InputError(f"{path}:{number} lacks an _id field; the corpus must be MTRAG corpus.jsonl")
        yield rec


def _fiqa_title(rec: dict[str, Any]) -> str:
    title = str(rec.get("title") or "").strip()
    return title or f"FiQA passage {rec['_id']}"
