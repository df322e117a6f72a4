"""The raw rows the golden set computes its expected figures from (:class:`bara.domains.funds.golden.Facts`).

Plain SQL on the loaded tables, written apart from :class:`~bara.domains.funds.repo.FundsRepo` on
purpose: the tools under test read through the repository, so the expected values must not, or a
fault in it would move answer and expectation together and pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GoldenRows:
    runner: Any  # a bara.store.base.SqlRunner

    def has_users(self) -> bool:
        return bool(self.runner.query("SELECT 1 FROM funds_users LIMIT 1"))

    def user_ids(self, other_than: str | None = None) -> list[str]:
        """Every user id, by id (without ``other_than``)."""
        if other_than is None:
            return [r[0] for r in self.runner.query("SELECT id FROM funds_users ORDER BY id")]
        return [r[0] for r in self.runner.query("SELECT id FROM funds_users WHERE id <> ?", (other_than,))]

    def units_held(self, user: str) -> list[tuple[str, str, str, float]]:
        """(code, name, fund house, net units) per scheme the user has transactions in."""
        return self.runner.query(
            "SELECT t.scheme_code, s.name, s.fund_house, SUM(CASE WHEN t.kind = 'REDEMPTION' THEN -t.units"
            " ELSE t.units END) FROM funds_transactions t JOIN funds_schemes s ON s.scheme_code = t.scheme_code"
            " WHERE t.user_id = ? GROUP BY t.scheme_code, s.name, s.fund_house", (user,))

    def latest_nav(self, code: str) -> tuple[str, float]:
        return self.runner.query("SELECT date, nav FROM funds_navs WHERE scheme_code = ?"
                                 " ORDER BY date DESC LIMIT 1", (code,))[0]

    def navs(self, code: str) -> list[tuple[str, float]]:
        """(date, NAV) of the scheme, oldest first."""
        return self.runner.query("SELECT date, nav FROM funds_navs WHERE scheme_code = ? ORDER BY date", (code,))

    def transactions(self, user: str) -> list[tuple[str, str, float, str]]:
        """(date, kind, amount, code) of the user's transactions, in stored order."""
        return self.runner.query("SELECT date, kind, amount, scheme_code FROM funds_transactions WHERE user_id = ?",
                                 (user,))

    def busiest_month(self, user: str) -> tuple[str, int]:
        """("YYYY-MM", transactions) of the month with most transactions (the earliest on a tie)."""
        return self.runner.query(
            "SELECT substr(date, 1, 7) AS m, COUNT(*) FROM funds_transactions WHERE user_id = ?"
            " GROUP BY m ORDER BY COUNT(*) DESC, m LIMIT 1", (user,))[0]

    def transaction_count(self, user: str) -> int:
        return self.runner.query("SELECT COUNT(*) FROM funds_transactions WHERE user_id = ?", (user,))[0][0]

    def transaction_date(self, user: str, offset: int) -> str:
        """The date of the user's ``offset``-th transaction (0 first) by date, then id."""
        return self.runner.query("SELECT date FROM funds_transactions WHERE user_id = ? ORDER BY date, id"
                                 " LIMIT 1 OFFSET ?", (user, offset))[0][0]

    def nav_codes(self) -> list[str]:
        """Every scheme code with NAVs, in code order."""
        return [r[0] for r in self.runner.query("SELECT DISTINCT scheme_code FROM funds_navs ORDER BY scheme_code")]
