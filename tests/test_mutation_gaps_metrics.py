"""Fund metrics and input sanitising at their boundaries (written against surviving mutants)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from bara.domains.funds import metrics as M
from bara.understand.sanitize import sanitize

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


def test_sanitize_reasons_and_cap_boundary():
    assert sanitize(b"plain ascii", 100).reasons == ()  # valid bytes are not "invalid utf-8"
    assert sanitize("caf\u00e9".encode("utf-8"), 100).text == "caf\u00e9"
    bad = sanitize(b"bad \xff byte", 100)
    assert "\ufffd" in bad.text and bad.reasons == ("input:invalid_utf8_replaced",)
    assert sanitize("lone \ud800 surrogate", 100).reasons == ("input:invalid_utf8_replaced",)
    empty = sanitize("  \x00 ", 100)
    assert (empty.text, empty.query) == ("", "") and empty.reasons[-1] == "input:empty"
    exact = sanitize("x" * 10, 10)
    assert exact.query == "x" * 10 and exact.reasons == ()  # exactly at the cap is not truncated
    over = sanitize("x" * 11, 10)
    assert over.query == "x" * 10 and over.text == "x" * 11 and over.reasons == ("input:truncated_for_retrieval",)
