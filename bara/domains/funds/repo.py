"""Read access to schemes, NAVs and one user's transactions.

Ownership rule: every query that touches user data has ``WHERE user_id = ?``
and the value bound there is the ``user_id`` argument, which tools take from
the session context, never from model-chosen arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Collection, Sequence

from bara.domains.funds.schema import REDEMPTION
from bara.text.stopwords import FUND_NAME_NOISE

_TX_COLUMNS = "id, user_id, scheme_code, date, kind, amount, units, nav, memo"
_SCHEME_COLUMNS = "scheme_code, name, category, fund_house, isin_growth, isin_reinvest"
#: Units below this are a closed position (registrars keep 3 decimals).
DUST_UNITS = 1e-6
MAX_CANDIDATES = 8
IN_CHUNK = 500  # bound parameters per IN (...) list; old SQLite builds allow 999
MAX_LIKE_TOKENS = 12  # name tokens pushed into SQL as LIKE filters; the rest are checked in Python
_TOKEN = re.compile(r"[a-z0-9]+")
#: (needle in lower-cased AMFI category, group); first hit wins. Groups follow the
#: SEBI scheme categorisation (circular SEBI/HO/IMD/DF3/CIR/P/2017/114, 6 Oct 2017),
#: with index funds/ETFs and fund-of-funds kept apart as AMFI lists them.
_GROUP_RULES: tuple[tuple[str, str], ...] = (
    ("fof", "Fund of Funds"), ("fund of funds", "Fund of Funds"),
    ("index", "Index Funds & ETFs"), ("etf", "Index Funds & ETFs"),
    ("solution oriented", "Solution Oriented"),
    ("hybrid", "Hybrid"), ("balanced", "Hybrid"), ("arbitrage", "Hybrid"),
    ("equity", "Equity"), ("elss", "Equity"), ("growth", "Equity"),
    ("debt", "Debt"), ("income", "Debt"), ("gilt", "Debt"), ("liquid", "Debt"),
    ("money market", "Debt"), ("overnight", "Debt"),
)


def category_group(category: str) -> str:
    """Broad asset class of an AMFI category string ("Equity Scheme - Mid Cap Fund" -> "Equity")."""
    low = category.lower()
    return next((group for needle, group in _GROUP_RULES if needle in low), "Other")


@dataclass(frozen=True)
class Scheme:
    code: str
    name: str
    category: str
    fund_house: str
    isin_growth: str = ""
    isin_reinvest: str = ""

    @property
    def category_group(self) -> str:
        return category_group(self.category)

    @property
    def plan(self) -> str:
        return "Direct" if "direct" in self.name.lower() else "Regular"

    @property
    def option(self) -> str:
        low = self.name.lower()
        if "growth" in low:
            return "Growth"
        return "IDCW" if ("idcw" in low or "dividend" in low) else "unspecified"


@dataclass(frozen=True)
class Transaction:
    id: str
    user_id: str
    scheme_code: str
    date: str
    kind: str
    amount: float
    units: float
    nav: float
    memo: str

    @property
    def cash_flow(self) -> float:
        """Investor's view: money paid in is negative, redemption proceeds positive."""
        return self.amount if self.kind == REDEMPTION else -self.amount


@dataclass(frozen=True)
class Holding:
    """Units held in one scheme, cost under the average-cost method, value at the latest NAV."""

    scheme: Scheme
    units: float
    invested: float
    nav: float
    nav_date: str
    value: float

    @property
    def gain(self) -> float:
        return self.value - self.invested


@dataclass(frozen=True)
class NavSeries:
    code: str
    dates: tuple[date, ...]
    navs: tuple[float, ...]


@dataclass(frozen=True)
class SchemeMatch:
    """Resolution of a code/ISIN/name: exactly one scheme, or the candidates (empty when none)."""

    query: str
    scheme: Scheme | None
    candidates: tuple[Scheme, ...] = ()
    total: int = 0  # how many matched before candidates were capped


@dataclass(frozen=True)
class FundsRepo:
    runner: Any  # a bara.store.base.SqlRunner

    # ------------------------------------------------------------------ schemes
    def scheme(self, code: str) -> Scheme | None:
        rows = self.runner.query(f"SELECT {_SCHEME_COLUMNS} FROM funds_schemes WHERE scheme_code = ?", (code,))
        return _scheme(rows[0]) if rows else None

    def schemes(self, codes: Collection[str]) -> dict[str, Scheme]:
        """Schemes by code (unknown codes are left out), fetched in chunks of :data:`IN_CHUNK`."""
        wanted, out = sorted(set(codes)), {}
        for i in range(0, len(wanted), IN_CHUNK):
            part = wanted[i:i + IN_CHUNK]
            marks = ",".join("?" * len(part))
            rows = self.runner.query(f"SELECT {_SCHEME_COLUMNS} FROM funds_schemes WHERE scheme_code IN ({marks})"
                                     " ORDER BY scheme_code", part)
            out.update((str(r[0]), _scheme(r)) for r in rows)
        return out

    def find_scheme(self, text: str, among: Collection[str] | None = None, with_navs: bool = False) -> SchemeMatch:
        """Exact code or ISIN first, then case-insensitive name substring, then all-tokens match.

        ``among`` restricts the search (e.g. to the user's schemes); ``with_navs``
        to schemes that have NAV history.
        """
        needle, tokens = text.strip(), _tokens(text)
        if not needle:
            return SchemeMatch(text, None)
        pool = [s for s in self._candidates(needle, tokens, with_navs) if among is None or s.code in among]
        exact = [s for s in pool if needle == s.code or needle.upper() in (s.isin_growth, s.isin_reinvest)]
        if len(exact) == 1:
            return SchemeMatch(text, exact[0], tuple(exact), 1)
        return _fuzzy(text, pool) if tokens else SchemeMatch(text, None)

    def _candidates(self, needle: str, tokens: list[str], with_navs: bool) -> list[Scheme]:
        """Schemes whose code/ISIN equals ``needle`` or whose name contains every token (SQL prefilter)."""
        likes = " AND ".join("LOWER(name) LIKE ?" for _ in tokens[:MAX_LIKE_TOKENS]) or "1 = 0"
        sql = (f"SELECT {_SCHEME_COLUMNS} FROM funds_schemes s WHERE (scheme_code = ? OR isin_growth = ?"
               f" OR isin_reinvest = ? OR ({likes}))")
        if with_navs:
            sql += " AND EXISTS (SELECT 1 FROM funds_navs n WHERE n.scheme_code = s.scheme_code)"
        params = [needle, needle.upper(), needle.upper(), *(f"%{t}%" for t in tokens[:MAX_LIKE_TOKENS])]
        return [_scheme(r) for r in self.runner.query(sql + " ORDER BY scheme_code", params)]

    # --------------------------------------------------------------------- NAVs
    def schemes_with_navs(self) -> list[tuple[str, str, str]]:
        """(code, name, fund house) of every scheme with NAV history, by code (the router's catalogue)."""
        return [(str(c), str(n), str(h)) for c, n, h in self.runner.query(
            "SELECT s.scheme_code, s.name, s.fund_house FROM funds_schemes s WHERE EXISTS"
            " (SELECT 1 FROM funds_navs n WHERE n.scheme_code = s.scheme_code) ORDER BY s.scheme_code")]

    def all_nav_series(self) -> dict[str, NavSeries]:
        """Every scheme's NAVs in one round trip, by scheme code."""
        grouped: dict[str, tuple[list[date], list[float]]] = {}
        for code, day, nav in self.runner.query("SELECT scheme_code, date, nav FROM funds_navs"
                                                " ORDER BY scheme_code, date"):
            ds, ns = grouped.setdefault(str(code), ([], []))
            ds.append(date.fromisoformat(day))
            ns.append(float(nav))
        return {code: NavSeries(code, tuple(ds), tuple(ns)) for code, (ds, ns) in grouped.items()}

    def nav_series(self, code: str) -> NavSeries:
        rows = self.runner.query("SELECT date, nav FROM funds_navs WHERE scheme_code = ? ORDER BY date", (code,))
        return NavSeries(code, tuple(date.fromisoformat(d) for d, _ in rows), tuple(float(v) for _, v in rows))

    def latest_nav(self, code: str) -> tuple[str, float] | None:
        rows = self.runner.query(
            "SELECT date, nav FROM funds_navs WHERE scheme_code = ? ORDER BY date DESC LIMIT 1", (code,))
        return (rows[0][0], float(rows[0][1])) if rows else None

    def nav_on_or_after(self, code: str, day: str) -> tuple[str, float] | None:
        """The first NAV dated ``day`` or later (a holiday rolls to the next NAV date)."""
        rows = self.runner.query("SELECT date, nav FROM funds_navs WHERE scheme_code = ? AND date >= ?"
                                 " ORDER BY date LIMIT 1", (code, day))
        return (rows[0][0], float(rows[0][1])) if rows else None

    # ---------------------------------------------------------------- user data
    def transactions(self, user_id: str, scheme_code: str | None = None,
                     from_date: str | None = None, to_date: str | None = None) -> list[Transaction]:
        """The user's transactions, oldest first, optionally one scheme and an inclusive date range."""
        sql, params = f"SELECT {_TX_COLUMNS} FROM funds_transactions WHERE user_id = ?", [user_id]
        for clause, value in (("scheme_code = ?", scheme_code), ("date >= ?", from_date), ("date <= ?", to_date)):
            if value is not None:
                sql, params = f"{sql} AND {clause}", [*params, value]
        return [_transaction(r) for r in self.runner.query(f"{sql} ORDER BY date, id", params)]

    def user_scheme_codes(self, user_id: str) -> list[str]:
        rows = self.runner.query("SELECT DISTINCT scheme_code FROM funds_transactions WHERE user_id = ?"
                                 " ORDER BY scheme_code", (user_id,))
        return [r[0] for r in rows]

    def held_codes(self) -> set[str]:
        """Scheme codes any user has a transaction in (the demo portfolios' schemes); read user by user,
        as every query of user data is scoped to one user."""
        return {c for user_id, _ in self._users() for c in self.user_scheme_codes(user_id)}

    def has_users(self) -> bool:
        """True when fund users are loaded (``bara funds load`` ran against this store)."""
        return bool(self.runner.query("SELECT 1 FROM funds_users LIMIT 1"))

    def user_names(self) -> list[str]:
        """Every user's name, by user id."""
        return [name for _, name in self._users()]

    def users(self) -> list[tuple[str, str, int]]:
        """(id, name, how many transactions) of every user, by id."""
        return [(user_id, name, int(self.runner.query("SELECT COUNT(*) FROM funds_transactions WHERE user_id = ?",
                                                      (user_id,))[0][0])) for user_id, name in self._users()]

    def _users(self) -> list[tuple[str, str]]:
        return [(str(i), str(n)) for i, n in self.runner.query("SELECT id, name FROM funds_users ORDER BY id")]

    def user_name(self, user_id: str) -> str | None:
        rows = self.runner.query("SELECT name FROM funds_users WHERE id = ?", (user_id,))
        return rows[0][0] if rows else None

    def holdings(self, user_id: str) -> list[Holding]:
        """Open positions of the user, valued at each scheme's latest NAV, largest value first."""
        positions = _positions(self.transactions(user_id))
        schemes = self.schemes(positions)
        out = [self._holding(schemes[c], units, cost, last) for c, (units, cost, last) in positions.items()
               if units > DUST_UNITS and c in schemes]
        return sorted(out, key=lambda h: (-h.value, h.scheme.code))

    def _holding(self, scheme: Scheme, units: float, cost: float, last: Transaction) -> Holding:
        nav_date, nav = self.latest_nav(scheme.code) or (last.date, last.nav)
        return Holding(scheme, units, cost, nav, nav_date, units * nav)

    def cash_flows(self, user_id: str, scheme_code: str | None = None) -> list[tuple[date, float]]:
        """Dated investor cash flows (purchases negative, redemptions positive), oldest first."""
        return [(date.fromisoformat(t.date), t.cash_flow) for t in self.transactions(user_id, scheme_code)]


def _positions(txs: Sequence[Transaction]) -> dict[str, tuple[float, float, Transaction]]:
    """Per scheme: (units, cost basis, last transaction), average-cost method.

    A redemption of u out of U units removes the fraction u/U of the cost basis
    (average basis for mutual fund shares, IRS Publication 550). This is the
    cost most portfolio statements show; Indian capital-gains tax uses FIFO
    lots instead, which this deliberately does not compute.
    """
    out: dict[str, tuple[float, float, Transaction]] = {}
    for t in txs:
        units, cost, _ = out.get(t.scheme_code, (0.0, 0.0, t))
        if t.kind == REDEMPTION:
            share = min(t.units / units, 1.0) if units > 0 else 1.0
            units, cost = units - t.units, cost * (1.0 - share)
        else:
            units, cost = units + t.units, cost + t.amount
        out[t.scheme_code] = (units, cost, t)
    return out


def _fuzzy(text: str, pool: list[Scheme]) -> SchemeMatch:
    wanted = _tokens(text)
    phrase = " ".join(wanted)
    named = [(s, _tokens(s.name)) for s in pool]
    exact = [s for s, toks in named if toks == wanted]
    if len(exact) == 1:
        return SchemeMatch(text, exact[0], tuple(exact), 1)
    hits = [s for s, toks in named if phrase in " ".join(toks)] or \
           [s for s, toks in named if set(wanted) <= set(toks)]
    hits.sort(key=lambda s: (len(s.name), s.name, s.code))
    found = hits[0] if len(hits) == 1 else None
    return SchemeMatch(text, found, tuple(hits[:MAX_CANDIDATES]), len(hits))


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in FUND_NAME_NOISE]


def _scheme(r: Sequence[Any]) -> Scheme:
    return Scheme(str(r[0]), r[1], r[2], r[3], r[4], r[5])


def _transaction(r: Sequence[Any]) -> Transaction:
    return Transaction(r[0], r[1], str(r[2]), r[3], r[4], float(r[5]), float(r[6]), float(r[7]), r[8])
