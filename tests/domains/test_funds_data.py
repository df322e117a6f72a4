"""Funds schema, AMFI loader, demo users and fact documents, on the real AMFI data.

Data: ``$BARA_DATA`` (else /work/shared/data) with ``amfi/`` and ``mtrag/``;
the module is skipped cleanly when it is absent. All schemes and NAVs are
loaded once per module (about 2 s).
"""

from __future__ import annotations

import ast
import gzip
import os
import sqlite3
from collections import defaultdict
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from bara.domains.funds import facts, loader, metrics, users
from bara.domains.funds.repo import FundsRepo
from bara.domains.funds.schema import FUNDS_MIGRATIONS
from bara.errors import InputError
from bara.store.migrations import Migration
from bara.store.sqlite import SQLiteStore

DATA = Path(os.environ.get("BARA_DATA", "/work/shared/data"))
AMFI = DATA / "amfi"
CORPUS = DATA / "mtrag" / "corpus.jsonl"
PACKAGE = Path(__file__).resolve().parents[2] / "bara" / "domains" / "funds"

pytestmark = pytest.mark.skipif(not (AMFI / "schemes.csv").is_file(), reason=f"AMFI data not found under {DATA}")


class PlainSqlite:
    """The smallest SqlRunner over stdlib sqlite3: proves the funds code needs nothing more."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA foreign_keys = ON")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self.conn.execute(sql, tuple(params)).rowcount

    def executemany(self, sql: str, rows: Any) -> None:
        self.conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")


def migrate(runner: Any) -> None:
    for _name, statements in FUNDS_MIGRATIONS:
        for sql in statements:
            runner.execute(sql)


@pytest.fixture(scope="module")
def store():
    s = SQLiteStore(":memory:", migrations=[Migration(n, tuple(sql)) for n, sql in FUNDS_MIGRATIONS])
    report = loader.load_amfi(s, DATA)
    ids = users.create_demo_users(s)
    yield s, report, ids
    s.close()


# ------------------------------------------------------------------- schema
def test_migrations_are_named_ordered_and_rerunnable():
    names = [n for n, _ in FUNDS_MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)
    runner = PlainSqlite()
    migrate(runner)
    migrate(runner)  # IF NOT EXISTS everywhere
    tables = {r[0] for r in runner.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"funds_schemes", "funds_navs", "funds_users", "funds_transactions"} <= tables
    indexes = {r[0] for r in runner.query("SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
    assert any("funds_transactions (user_id" in sql for sql in indexes)


def _sql_literals(path: Path) -> list[str]:
    """Every string literal (and literal part of an f-string) in a module."""
    return [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)]


def test_sql_is_portable_and_user_data_is_always_scoped():
    banned = ("INSERT OR", "REPLACE INTO", "AUTOINCREMENT", "strftime", "julianday", "datetime(", " GLOB ",
              "ifnull(", "group_concat", "PRAGMA")
    for path in PACKAGE.rglob("*.py"):
        for text in _sql_literals(path):
            assert not any(b.lower() in text.lower() for b in banned), (path.name, text)
            # DDL (the schema steps, incl. the owner-keys re-key registered from schema.py) is not a query,
            # nor is a bare table name (the row-level-security registration names its table).
            ddl = ("INSERT", "CREATE", "ALTER TABLE", "DROP TABLE")
            if "funds_transactions" in text and text.strip() != "funds_transactions" \
                    and not text.lstrip().startswith(ddl):
                assert "user_id = ?" in text, f"{path.name}: unscoped user-data SQL: {text}"


# ------------------------------------------------------------------- loader
def test_load_counts_match_the_files(store):
    s, report, _ = store
    assert report.schemes == 14977 and s.query("SELECT COUNT(*) FROM funds_schemes")[0][0] == 14977
    assert report.navs + report.skipped_navs == 331999  # every NAV row is stored or counted as skipped
    assert report.skipped_navs == 783  # AMFI's 0.0000 placeholders
    assert s.query("SELECT COUNT(*), MIN(nav) FROM funds_navs")[0][0] == report.navs
    assert s.query("SELECT MIN(nav) FROM funds_navs")[0][0] > 0
    assert report.nav_schemes == 1345 and report.last_date == "2026-08-23"
    row = s.query("SELECT name, category, fund_house, isin_growth FROM funds_schemes WHERE scheme_code = ?",
                  ("122639",))[0]
    assert row == ("Parag Parikh Flexi Cap Fund - Direct Plan - Growth", "Equity Scheme - Flexi Cap Fund",
                   "PPFAS Mutual Fund", "INF879O01027")


def test_subset_reload_replaces_and_keeps_user_transactions():
    runner = PlainSqlite()
    migrate(runner)
    first = loader.load_amfi(runner, DATA, only_codes={"122639", "118955"})
    assert first.schemes == 14977 and first.nav_schemes == 2
    runner.execute("INSERT INTO funds_users (id, name, created) VALUES ('u_t', 'T', '2026-01-01')")
    runner.execute("INSERT INTO funds_transactions VALUES ('u_t-1', 'u_t', '122639', '2026-01-01', 'SIP',"
                   " 100.0, 1.0, 100.0, '')")
    again = loader.load_amfi(runner, AMFI, only_codes={"122639", "118955"})  # the amfi/ folder works too
    assert (again.schemes, again.navs, again.skipped_navs) == (first.schemes, first.navs, first.skipped_navs)
    assert runner.query("SELECT COUNT(*) FROM funds_navs")[0][0] == first.navs
    assert runner.query("SELECT COUNT(*) FROM funds_transactions")[0][0] == 1  # schemes upserted, not dropped


def test_missing_files_are_named(tmp_path):
    with pytest.raises(InputError, match="schemes.csv"):
        loader.load_amfi(PlainSqlite(), tmp_path)
    (tmp_path / "schemes.csv").write_text((AMFI / "schemes.csv").read_text()[:2000].rsplit("\n", 1)[0])
    with pytest.raises(InputError, match="nav_history.csv.gz"):
        loader.load_amfi(PlainSqlite(), tmp_path)


def test_wrong_columns_are_named(tmp_path):
    (tmp_path / "schemes.csv").write_text("code,name\n1,x\n")
    with gzip.open(tmp_path / "nav_history.csv.gz", "wt") as fh:
        fh.write("date,scheme_code,nav\n")
    with pytest.raises(InputError, match="scheme_code"):
        loader.load_amfi(PlainSqlite(), tmp_path)


# --------------------------------------------------------------- demo users
def _all_rows(s: Any) -> list[tuple]:
    return s.query("SELECT id, user_id, scheme_code, date, kind, amount, units, nav, memo FROM funds_transactions"
                   " ORDER BY id")


def test_demo_users_are_deterministic(store):
    s, _, ids = store
    assert ids == ["u_asha", "u_bilal", "u_chitra", "u_dev", "u_esha", "u_farhan"]
    first = _all_rows(s)
    assert users.create_demo_users(s, seed=7) == ids and _all_rows(s) == first
    users.create_demo_users(s, seed=8)
    assert _all_rows(s) != first
    users.create_demo_users(s, seed=7)
    assert _all_rows(s) == first


def test_transactions_use_real_navs_and_consistent_units(store):
    s, _, _ = store
    wrong = s.query("SELECT COUNT(*) FROM funds_transactions t LEFT JOIN funds_navs n"
                    " ON n.scheme_code = t.scheme_code AND n.date = t.date WHERE n.nav IS NULL OR n.nav <> t.nav")
    assert wrong[0][0] == 0
    for _id, _u, _c, _d, kind, amount, units, nav, _m in _all_rows(s):
        if kind == "REDEMPTION":
            assert amount == pytest.approx(units * nav, abs=0.01)
        else:
            assert units == pytest.approx(amount / nav, abs=0.0005)  # registrars allot 3 decimals


def test_holiday_rolls_to_the_next_nav_date(store):
    s, _, _ = store
    dates = [date.fromisoformat(r[0]) for r in
             s.query("SELECT date FROM funds_navs WHERE scheme_code = '122639' AND date >= '2025-08-01' ORDER BY date")]
    before, after = next((a, b) for a, b in zip(dates, dates[1:], strict=False) if (b - a).days > 1)
    holiday = before + timedelta(days=1)
    row = users._price(FundsRepo(s), users.Order("122639", holiday.isoformat(), "SIP", 5000.0, "x"))
    assert row is not None and row.day == after.isoformat()
    assert row.nav == s.query("SELECT nav FROM funds_navs WHERE scheme_code = '122639' AND date = ?",
                              (after.isoformat(),))[0][0]


def test_redemptions_never_exceed_units_held(store):
    s, _, ids = store
    balance: dict[tuple[str, str], float] = defaultdict(float)
    redemptions = 0
    for _id, user, code, _d, kind, _a, units, _n, _m in s.query(
            "SELECT id, user_id, scheme_code, date, kind, amount, units, nav, memo FROM funds_transactions"
            " ORDER BY user_id, date, id"):
        balance[user, code] += -units if kind == "REDEMPTION" else units
        redemptions += kind == "REDEMPTION"
        assert balance[user, code] >= -1e-9, (user, code, _id)
    assert redemptions >= 2
    for uid in ids:
        kinds = {r[0] for r in s.query("SELECT DISTINCT kind FROM funds_transactions WHERE user_id = ?", (uid,))}
        assert {"SIP", "LUMPSUM"} <= kinds
        assert len(FundsRepo(s).user_scheme_codes(uid)) >= 2


def test_one_memo_carries_the_injection(store):
    s, _, _ = store
    rows = s.query("SELECT user_id, memo FROM funds_transactions WHERE memo LIKE ?", ("%ignore previous%",))
    assert rows == [(users.INJECTION_USER, users.INJECTION_MEMO)]


def test_holdings_match_raw_sql(store):
    s, _, ids = store
    repo = FundsRepo(s)
    for uid in ids:
        raw = dict(s.query("SELECT scheme_code, SUM(CASE WHEN kind = 'REDEMPTION' THEN -units ELSE units END)"
                           " FROM funds_transactions WHERE user_id = ? GROUP BY scheme_code", (uid,)))
        held = {h.scheme.code: h for h in repo.holdings(uid)}
        assert set(held) == {c for c, u in raw.items() if u > 1e-6}
        for code, h in held.items():
            assert h.units == pytest.approx(raw[code])
            assert h.value == pytest.approx(raw[code] * repo.latest_nav(code)[1])


# ---------------------------------------------------------------------- facts
def test_scheme_fact_documents(store):
    s, report, _ = store
    docs = facts.scheme_fact_documents(s)
    assert len(docs) == report.nav_schemes and len({d[0] for d in docs}) == len(docs)
    source, title, text = next(d for d in docs if d[0] == "amfi/scheme/122639")
    assert title.startswith("Parag Parikh Flexi Cap") and "PPFAS Mutual Fund" in text
    series = FundsRepo(s).nav_series("122639")
    one_year = metrics.trailing_return(series.dates, series.navs, 12)
    assert f"1Y {100 * one_year:+.2f}%" in text
    assert "does not include an expense ratio" in text and len(text) < 900


def test_fiqa_documents():
    if not CORPUS.is_file():
        pytest.skip(f"MTRAG corpus not found at {CORPUS}")
    docs = facts.fiqa_documents(CORPUS)
    assert len(docs) == 157 and all(src.startswith("fiqa/") and text for src, _, text in docs)
    with pytest.raises(InputError, match="nowhere.jsonl"):
        facts.fiqa_documents(CORPUS.parent / "nowhere.jsonl")
