"""Typed records for the tool results the rule router reads back from the transcript.

Tool results reach the router as JSON text in :class:`~bara.messages.ToolResultMessage`s (the same
envelopes a real model sees); these records are what the router works with once it has parsed them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class SearchHit:
    """One ``search_documents`` hit; ``score`` is the fused (RRF) score, 0.0 when absent."""

    source: str = ""
    title: str = ""
    text: str = ""
    score: float = 0.0

    @classmethod
    def read(cls, raw: Any) -> "SearchHit":
        """A hit from the tool's JSON; missing or malformed fields read as empty."""
        h = raw if isinstance(raw, Mapping) else {}
        return cls(str(h.get("source", "")), str(h.get("title", "")), str(h.get("text", "")),
                   float(h.get("score") or 0.0))


def search_hits(data: Mapping[str, Any]) -> tuple[SearchHit, ...]:
    """The hits of a ``search_documents`` result's ``data``, in rank order."""
    return tuple(SearchHit.read(h) for h in data.get("hits") or [])


def _mapping(raw: Any) -> Mapping[str, Any]:
    return raw if isinstance(raw, Mapping) else {}


# Figures below stay as the tool wrote them (int, float or None): the replies format them as they come.
@dataclass(frozen=True)
class SchemeRef:
    """A fund named in a result (``scope`` of ``compute_xirr``)."""

    scheme: Any
    scheme_code: Any

    @classmethod
    def read(cls, raw: Any) -> "SchemeRef | None":
        """A ``{"scheme", "scheme_code"}`` object; None for anything else (``"portfolio"``, ``{}``)."""
        return cls(raw.get("scheme"), raw.get("scheme_code")) if isinstance(raw, Mapping) and raw else None


@dataclass(frozen=True)
class Holding:
    """One ``get_holdings`` row."""

    scheme: Any
    scheme_code: Any
    units: Any
    nav: Any
    current_value: Any
    invested: Any
    gain: Any
    gain_pct: Any

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> "Holding":
        return cls(raw["scheme"], raw["scheme_code"], raw["units"], raw["nav"], raw["current_value"],
                   raw["invested"], raw["gain"], raw["gain_pct"])


@dataclass(frozen=True)
class Holdings:
    """A ``get_holdings`` result; ``note`` is None when the tool wrote none."""

    holdings: tuple[Holding, ...]
    as_of: Any
    totals: Mapping[str, Any]
    note: str | None

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> "Holdings":
        rows = tuple(Holding.read(h) for h in data.get("holdings") or ())
        return cls(rows, data.get("as_of"), _mapping(data.get("totals", {})),
                   str(data["note"]) if "note" in data else None)


@dataclass(frozen=True)
class Xirr:
    """A ``compute_xirr`` result; ``scope`` is None for the whole portfolio."""

    scope: SchemeRef | None
    xirr_pct: Any
    reason: Any
    as_of: Any
    transactions: Any
    first_transaction: Any
    total_invested: Any
    total_redeemed: Any
    current_value: Any
    caution: Any
    absolute_return_pct: Any = None  # flows too short to annualise: the return over the period instead
    span_days: Any = None

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> "Xirr":
        return cls(SchemeRef.read(data.get("scope")), *(data.get(k) for k in (
            "xirr_pct", "reason", "as_of", "transactions", "first_transaction", "total_invested", "total_redeemed",
            "current_value", "caution", "absolute_return_pct", "span_days")))


@dataclass(frozen=True)
class FundFigures:
    """One ``compare_funds`` row."""

    scheme: Any
    scheme_code: Any
    category: Any
    fund_house: Any
    returns_pct: Mapping[str, Any]
    volatility_1y_pct: Any
    max_drawdown_1y_pct: Any
    drawdown_peak: Any
    drawdown_trough: Any
    nav: Any
    nav_date: Any

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> "FundFigures":
        return cls(raw.get("scheme"), raw.get("scheme_code"), raw.get("category"), raw.get("fund_house"),
                   _mapping(raw.get("returns_pct")), *(raw.get(k) for k in (
                       "volatility_1y_pct", "max_drawdown_1y_pct", "drawdown_peak", "drawdown_trough", "nav",
                       "nav_date")))

    @property
    def return_1y(self) -> Any:
        return self.returns_pct.get("1Y")


def compared_funds(data: Mapping[str, Any]) -> tuple[FundFigures, ...]:
    """The rows of a ``compare_funds`` result's ``data``, in the order the tool listed them."""
    return tuple(FundFigures.read(f) for f in data.get("funds") or ())
