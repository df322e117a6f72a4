"""Pure return and risk metrics over NAV series and dated cash flows.

Conventions: cash flows are seen from the investor — purchases negative,
redemptions and the terminal (current) value positive. NAV series are
ascending by date with strictly positive values; callers filter AMFI's zero
placeholders before calling (the loader already does).
"""

from __future__ import annotations

import bisect
import calendar
import math
from dataclasses import dataclass
from datetime import date
from typing import Sequence

import numpy as np
import pyxirr

#: Trailing windows reported everywhere, label -> calendar months.
TRAILING_PERIODS: tuple[tuple[str, int], ...] = (("1M", 1), ("3M", 3), ("6M", 6), ("1Y", 12))
TRADING_DAYS_PER_YEAR = 252
#: A start NAV more than this many days before the window start is too stale to use.
MAX_START_GAP_DAYS = 7


@dataclass(frozen=True)
class XirrResult:
    """Annualised money-weighted return as a fraction (0.12 = 12 %), or None with the reason."""

    rate: float | None
    reason: str | None = None
    span_days: int = 0


@dataclass(frozen=True)
class Drawdown:
    """Largest peak-to-trough fall as a positive fraction, with the indices of peak and trough."""

    depth: float
    peak: int
    trough: int


def xirr(flows: Sequence[tuple[date, float]]) -> XirrResult:
    """Rate r solving sum_i CF_i / (1 + r) ** ((d_i - d_0) / 365) = 0.

    This is the XIRR definition of Microsoft Excel (Actual/365 day count), as
    implemented by ``pyxirr.xirr`` (https://anexen.github.io/pyxirr/functions.html#xirr).
    The terminal value must already be in ``flows`` as a positive flow dated
    at the valuation (latest NAV) date. No flows, one-signed flows, flows all
    on one day (pyxirr gives 0.0 when they net to zero, which is no return at
    all but an undefined one), or a non-finite solution give ``rate=None``
    and a reason. Whether a rate over a short span is shown at all is the tool's choice
    (``compute_xirr``: below ``Settings.xirr_min_annualise_days`` it reports the absolute return).
    """
    kept = [(d, float(a)) for d, a in flows if a]
    if not kept:
        return XirrResult(None, "no cash flows")
    span = (max(d for d, _ in kept) - min(d for d, _ in kept)).days
    if all(a > 0 for _, a in kept) or all(a < 0 for _, a in kept):
        return XirrResult(None, "all cash flows have the same sign (needs money in and value out)", span)
    if span == 0:  # any rate (net zero) or none (net gain/loss) solves flows with no time between them
        return XirrResult(None, "all cash flows fall on one day; an annualised return needs time between them")
    try:
        rate = pyxirr.xirr([d for d, _ in kept], [a for _, a in kept])
    except pyxirr.InvalidPaymentsError as exc:
        return XirrResult(None, f"invalid cash flows: {exc}", span)
    if rate is None or not math.isfinite(rate):
        return XirrResult(None, "no finite rate solves the cash flows (e.g. all on one day)", span)
    return XirrResult(float(rate), None, span)


def months_back(day: date, months: int) -> date:
    """Same day ``months`` calendar months earlier, clamped to the month's last day (31 Mar - 1M = 28/29 Feb)."""
    total = day.year * 12 + (day.month - 1) - months
    year, month = divmod(total, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last))


def trailing_return(dates: Sequence[date], navs: Sequence[float], months: int,
                    max_gap_days: int = MAX_START_GAP_DAYS) -> float | None:
    """Point-to-point return NAV_end / NAV_start - 1 over the last ``months`` months.

    NAV_start is the last NAV on or before the window start (the previous
    business day's NAV when the start is a holiday, as fund factsheets do).
    Windows of a year or less are absolute, not annualised (GIPS 2020,
    CFA Institute: returns for periods under one year must not be annualised).
    None when history is too short or the start NAV is over ``max_gap_days`` stale.
    """
    _check_series(dates, navs)
    if len(navs) < 2:
        return None
    start = months_back(dates[-1], months)
    i = bisect.bisect_right(list(dates), start) - 1
    if i < 0 or (start - dates[i]).days > max_gap_days:
        return None
    return float(navs[-1]) / float(navs[i]) - 1.0


def trailing_returns(dates: Sequence[date], navs: Sequence[float]) -> dict[str, float | None]:
    """:func:`trailing_return` for every window in :data:`TRAILING_PERIODS`."""
    return {label: trailing_return(dates, navs, months) for label, months in TRAILING_PERIODS}


def log_returns(navs: Sequence[float]) -> np.ndarray:
    """r_t = ln(P_t / P_{t-1}) between consecutive observations."""
    prices = _positive(navs)
    return np.diff(np.log(prices))


def annualised_volatility(navs: Sequence[float], periods_per_year: int = TRADING_DAYS_PER_YEAR) -> float | None:
    """Sample standard deviation of daily log returns times sqrt(periods_per_year).

    Hull, *Options, Futures, and Other Derivatives*, "Estimating volatility
    from historical data": sigma = s / sqrt(tau) with tau = 1/252 year per
    trading day. Needs at least three prices (two returns); None otherwise.
    """
    returns = log_returns(navs)
    if len(returns) < 2:
        return None
    return float(np.std(returns, ddof=1) * math.sqrt(periods_per_year))


def max_drawdown(navs: Sequence[float]) -> Drawdown | None:
    """MDD = max_t (1 - P_t / max_{s<=t} P_s) (Magdon-Ismail & Atiya, "Maximum drawdown", Risk, 2004).

    Depth 0.0 for a series that never falls; None for an empty series.
    """
    prices = _positive(navs)
    if len(prices) == 0:
        return None
    peaks = np.maximum.accumulate(prices)
    falls = 1.0 - prices / peaks
    trough = int(np.argmax(falls))
    peak = int(np.argmax(prices[: trough + 1]))
    return Drawdown(float(falls[trough]), peak, trough)


def since(dates: Sequence[date], start: date) -> int:
    """Index of the last observation on or before ``start`` (0 when none): where a window begins."""
    return max(bisect.bisect_right(list(dates), start) - 1, 0)


def _positive(navs: Sequence[float]) -> np.ndarray:
    prices = np.asarray(navs, dtype=float)
    if prices.ndim != 1 or not np.all(np.isfinite(prices)) or np.any(prices <= 0):
        raise ValueError("NAVs must be a 1-D series of finite positive numbers; the caller must drop "
                         "AMFI's 0.0000 placeholders before computing metrics")
    return prices


def _check_series(dates: Sequence[date], navs: Sequence[float]) -> None:
    if len(dates) != len(navs):
        raise ValueError(f"{len(dates)} dates but {len(navs)} NAVs: the caller must pass aligned series")
    if any(b <= a for a, b in zip(dates, dates[1:], strict=False)):
        raise ValueError("dates must be strictly ascending: the caller must sort and de-duplicate them")
    _positive(navs)
