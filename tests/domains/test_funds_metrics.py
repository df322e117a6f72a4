"""Fund metrics against independent computations and hand-worked series (no data files needed)."""

from __future__ import annotations

import math
from datetime import date, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bara.domains.funds import metrics
from bara.domains.funds import metrics as M

FUZZ = settings(max_examples=300, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


def npv(rate: float, flows: list[tuple[date, float]]) -> float:
    """Excel XIRR's objective: sum CF_i / (1 + r) ** (days_i / 365)."""
    d0 = min(d for d, _ in flows)
    return sum(a / (1.0 + rate) ** ((d - d0).days / 365.0) for d, a in flows)


def bisect_xirr(flows: list[tuple[date, float]], lo: float = -0.9999, hi: float = 100.0) -> float:
    """Independent XIRR: bisection on NPV, which is monotone in r for one sign change."""
    f_lo = npv(lo, flows)
    assert (f_lo > 0) != (npv(hi, flows) > 0), "test bug: the bisection bracket holds no root"
    for _ in range(300):
        mid = (lo + hi) / 2
        f_mid = npv(mid, flows)
        if (f_mid > 0) == (f_lo > 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
    return (lo + hi) / 2


# ----------------------------------------------------------------------- XIRR
def test_xirr_one_year_leap_span_matches_closed_form():
    flows = [(date(2020, 1, 1), -100.0), (date(2021, 1, 1), 110.0)]  # 366 days
    result = metrics.xirr(flows)
    assert result.rate == pytest.approx(1.1 ** (365 / 366) - 1, abs=1e-9)
    assert result.reason is None and result.span_days == 366


def test_xirr_monthly_sip_matches_bisection():
    flows = [(date(2025, m, 5), -5000.0) for m in range(1, 13)] + [(date(2026, 1, 5), 64000.0)]
    assert metrics.xirr(flows).rate == pytest.approx(bisect_xirr(flows), abs=1e-7)


def test_xirr_with_redemption_in_the_middle_matches_bisection():
    flows = [(date(2024, 1, 10), -100000.0), (date(2024, 6, 3), -25000.0),
             (date(2024, 9, 9), 30000.0), (date(2025, 3, 31), 109500.0)]
    assert metrics.xirr(flows).rate == pytest.approx(bisect_xirr(flows), abs=1e-7)


@pytest.mark.parametrize("flows, reason", [
    ([], "no cash flows"),
    ([(date(2025, 1, 1), 0.0)], "no cash flows"),
    ([(date(2025, 1, 1), -10.0), (date(2025, 6, 1), -10.0)], "same sign"),
    ([(date(2025, 1, 1), 10.0)], "same sign"),
    ([(date(2025, 1, 1), -10.0), (date(2025, 1, 1), 12.0)], "on one day"),
    ([(date(2025, 1, 1), -10.0), (date(2025, 1, 1), 10.0)], "on one day"),  # pyxirr: 0.0, though any rate fits
    ([(date(2025, 1, 1), -10.0), (date(2025, 1, 1), 4.0), (date(2025, 1, 1), 6.0)], "on one day"),
])
def test_xirr_undefined_cases_give_none_with_reason(flows, reason):
    result = metrics.xirr(flows)
    assert result.rate is None and reason in (result.reason or "")


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 700), st.floats(100, 50_000)), min_size=1, max_size=24),
       st.floats(0.7, 2.0), st.integers(90, 400))
def test_xirr_property_agrees_with_bisection(buys, growth, extra_days):
    """Random SIP-like purchases and a terminal value: pyxirr and an NPV bisection agree.

    The terminal value comes at least 90 days after the last purchase, so the
    rate stays inside the bisection bracket (-99.99 %, +10000 %).
    """
    start = date(2024, 1, 1)
    flows = [(start + timedelta(days=d), -a) for d, a in buys]
    end = start + timedelta(days=max(d for d, _ in buys) + extra_days)
    flows.append((end, growth * sum(a for _, a in buys)))
    rate = metrics.xirr(flows).rate
    assert rate is not None
    expected = bisect_xirr(flows)
    assert rate == pytest.approx(expected, rel=1e-6, abs=1e-6)
    assert abs(npv(rate, flows)) <= 1e-6 * sum(abs(a) for _, a in flows)


# ------------------------------------------------------------------ windows
@pytest.mark.parametrize("day, months, expected", [
    (date(2026, 3, 31), 1, date(2026, 2, 28)),
    (date(2024, 3, 31), 1, date(2024, 2, 29)),
    (date(2026, 1, 15), 1, date(2025, 12, 15)),
    (date(2026, 8, 23), 12, date(2025, 8, 23)),
    (date(2026, 8, 31), 6, date(2026, 2, 28)),
])
def test_months_back_clamps_to_month_end(day, months, expected):
    assert metrics.months_back(day, months) == expected


def _daily(start: date, navs: list[float]) -> tuple[list[date], list[float]]:
    return [start + timedelta(days=i) for i in range(len(navs))], navs


def test_trailing_return_point_to_point():
    dates, navs = _daily(date(2026, 1, 1), [100.0 + i for i in range(40)])  # 2026-01-01 .. 2026-02-09
    # 1M before 2026-02-09 is 2026-01-09, NAV 108; latest NAV 139.
    assert metrics.trailing_return(dates, navs, 1) == pytest.approx(139 / 108 - 1)


def test_trailing_return_uses_previous_nav_when_start_is_a_holiday():
    dates = [date(2026, 1, 2), date(2026, 1, 5), date(2026, 2, 4)]  # no NAV on 2026-01-04
    assert metrics.trailing_return(dates, [10.0, 11.0, 12.0], 1) == pytest.approx(12 / 10 - 1)


def test_trailing_return_none_when_history_short_or_stale():
    dates, navs = _daily(date(2026, 1, 1), [100.0] * 20)
    assert metrics.trailing_return(dates, navs, 1) is None  # starts after the window start
    stale = [date(2025, 12, 1), date(2026, 1, 30), date(2026, 2, 20)]  # window starts 2026-01-20: 50 days stale
    assert metrics.trailing_return(stale, [1.0, 2.0, 3.0], 1) is None
    assert metrics.trailing_return([date(2026, 1, 1)], [5.0], 1) is None


def test_trailing_returns_labels():
    dates, navs = _daily(date(2025, 1, 1), [100.0 * 1.001 ** i for i in range(400)])
    got = metrics.trailing_returns(dates, navs)
    assert list(got) == ["1M", "3M", "6M", "1Y"]
    days_1y = (dates[-1] - metrics.months_back(dates[-1], 12)).days
    assert got["1Y"] == pytest.approx(1.001 ** days_1y - 1)


# --------------------------------------------------------------------- risk
def test_volatility_hand_computed():
    # log returns ln 1.1, ln 0.9, ln 1.1; sample sd by hand, times sqrt(252)
    r = [math.log(1.1), math.log(0.9), math.log(1.1)]
    mean = sum(r) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in r) / 2)
    assert metrics.annualised_volatility([100, 110, 99, 108.9]) == pytest.approx(sd * math.sqrt(252))
    assert metrics.annualised_volatility([100, 110, 99, 108.9]) == pytest.approx(1.83917, abs=1e-5)


def test_volatility_zero_for_constant_growth_and_none_when_too_short():
    assert metrics.annualised_volatility([100 * 1.01 ** i for i in range(30)]) == pytest.approx(0.0, abs=1e-12)
    assert metrics.annualised_volatility([100, 101]) is None


@pytest.mark.parametrize("navs, depth, peak, trough", [
    ([100, 120, 90, 130, 65, 70], 0.5, 3, 4),
    ([100, 80], 0.2, 0, 1),
    ([1, 2, 3, 4], 0.0, 0, 0),
    ([50, 40, 60, 45], 0.25, 2, 3),
])
def test_max_drawdown_hand_series(navs, depth, peak, trough):
    dd = metrics.max_drawdown(navs)
    assert dd is not None
    assert (dd.depth, dd.peak, dd.trough) == (pytest.approx(depth), peak, trough)


@FUZZ
@given(st.lists(st.floats(0.01, 1e6), min_size=1, max_size=60))
def test_max_drawdown_property_matches_brute_force(navs):
    brute = max((1 - navs[j] / navs[i] for i in range(len(navs)) for j in range(i, len(navs))), default=0.0)
    dd = metrics.max_drawdown(navs)
    assert dd is not None and 0.0 <= dd.depth < 1.0
    assert dd.depth == pytest.approx(max(brute, 0.0), abs=1e-12)
    assert dd.peak <= dd.trough


def test_invalid_series_say_who_must_fix_them():
    with pytest.raises(ValueError, match="caller"):
        metrics.max_drawdown([10.0, 0.0, 11.0])
    with pytest.raises(ValueError, match="caller"):
        metrics.annualised_volatility([10.0, float("nan"), 11.0])
    with pytest.raises(ValueError, match="caller"):
        metrics.trailing_return([date(2026, 1, 2), date(2026, 1, 1)], [1.0, 2.0], 1)
    assert metrics.max_drawdown([]) is None


# Fund metrics at their boundaries (written against surviving mutants).


D0 = date(2025, 1, 1)


def test_xirr_reasons_and_span():
    assert M.xirr([]) == M.XirrResult(None, "no cash flows", 0)
    assert M.xirr([(D0, 0.0)]).reason == "no cash flows"  # zero flows are dropped
    same = M.xirr([(D0, -100.0), (D0 + timedelta(days=30), -50.0)])
    assert same.rate is None and "same sign" in same.reason and same.span_days == 30
    positive = M.xirr([(D0, 100.0), (D0 + timedelta(days=10), 1.0)])
    assert positive.rate is None and "same sign" in positive.reason and positive.span_days == 10
    small = M.xirr([(D0, -0.5), (D0 + timedelta(days=365), 0.6)])  # amounts below one unit still count
    assert small.rate == pytest.approx(0.2, abs=1e-6) and small.span_days == 365
    one_day = M.xirr([(D0, -100.0), (D0, 110.0)])
    assert one_day.rate is None and one_day.reason and one_day.span_days == 0
    ok = M.xirr([(D0, -100.0), (D0 + timedelta(days=365), 110.0)])
    assert ok.rate == pytest.approx(0.10, abs=1e-6) and ok.reason is None and ok.span_days == 365


def test_trailing_return_needs_two_navs_and_a_fresh_start():
    dates, navs = [D0, D0 + timedelta(days=31)], [10.0, 11.0]
    assert M.trailing_return(dates, navs, 1) == pytest.approx(0.1)  # exactly two NAVs are enough
    assert M.trailing_return(dates[:1], navs[:1], 1) is None
    end = date(2025, 3, 10)
    start = M.months_back(end, 1)
    at_gap = [start - timedelta(days=M.MAX_START_GAP_DAYS), end]
    assert M.trailing_return(at_gap, [10.0, 12.0], 1) == pytest.approx(0.2)  # a gap of exactly the limit is fine
    past_gap = [start - timedelta(days=M.MAX_START_GAP_DAYS + 1), end]
    assert M.trailing_return(past_gap, [10.0, 12.0], 1) is None


def test_volatility_needs_two_returns_and_accepts_integers():
    assert M.annualised_volatility([10, 11]) is None
    three = M.annualised_volatility([10, 11, 10])
    assert three is not None and three > 0
    assert M.log_returns([1, 2]).dtype.kind == "f"  # integer NAVs are not truncated
    assert M.log_returns([1, 2])[0] == pytest.approx(0.6931, abs=1e-4)


def test_series_checks_name_what_to_fix():
    with pytest.raises(ValueError, match="2 dates but 1 NAVs"):
        M.trailing_return([D0, D0 + timedelta(days=1)], [1.0], 1)
    with pytest.raises(ValueError, match="strictly ascending"):
        M.trailing_return([D0, D0], [1.0, 2.0], 1)  # equal dates are refused too
    with pytest.raises(ValueError, match="NAVs must be a 1-D series of finite positive numbers"):
        M.log_returns([1.0, 0.0])
    with pytest.raises(ValueError, match="AMFI's 0.0000 placeholders"):
        M.max_drawdown([1.0, -2.0])
