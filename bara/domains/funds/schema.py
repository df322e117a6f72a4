"""Tables of the mutual-fund domain, as ordered, named, portable migration steps.

Portable means the same text runs on SQLite and PostgreSQL: TEXT ISO dates,
DOUBLE PRECISION numbers (SQLite gives it REAL affinity; PostgreSQL's REAL
would be float4 and lose rupee precision), TEXT keys instead of
backend-specific auto-increment, and ``CREATE ... IF NOT EXISTS``.

Tables are prefixed ``funds_`` because the store is shared with other domains
(memory tiers also have users). Amounts and units are always positive; the
``kind`` column gives the direction of a transaction.
"""

from __future__ import annotations

#: Transaction kinds; purchases add units, redemptions remove them.
PURCHASE_KINDS = ("SIP", "LUMPSUM")
REDEMPTION = "REDEMPTION"

_SCHEMES = """CREATE TABLE IF NOT EXISTS funds_schemes (
    scheme_code TEXT PRIMARY KEY,
    isin_growth TEXT NOT NULL DEFAULT '',
    isin_reinvest TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL,
    category TEXT NOT NULL DEFAULT '',
    fund_house TEXT NOT NULL DEFAULT '')"""

_NAVS = """CREATE TABLE IF NOT EXISTS funds_navs (
    scheme_code TEXT NOT NULL REFERENCES funds_schemes (scheme_code),
    date TEXT NOT NULL,
    nav DOUBLE PRECISION NOT NULL CHECK (nav > 0),
    PRIMARY KEY (scheme_code, date))"""

_USERS = """CREATE TABLE IF NOT EXISTS funds_users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created TEXT NOT NULL)"""

_TRANSACTIONS = """CREATE TABLE IF NOT EXISTS funds_transactions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES funds_users (id),
    scheme_code TEXT NOT NULL REFERENCES funds_schemes (scheme_code),
    date TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('SIP', 'LUMPSUM', 'REDEMPTION')),
    amount DOUBLE PRECISION NOT NULL CHECK (amount > 0),
    units DOUBLE PRECISION NOT NULL CHECK (units > 0),
    nav DOUBLE PRECISION NOT NULL CHECK (nav > 0),
    memo TEXT NOT NULL DEFAULT '')"""

#: ``(name, statements)`` in release order. A released step is never edited: add a new one.
FUNDS_MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("0101_funds_schemes_navs", (
        _SCHEMES,
        _NAVS,
        "CREATE INDEX IF NOT EXISTS funds_schemes_name ON funds_schemes (name)",
    )),
    ("0102_funds_users_transactions", (
        _USERS,
        _TRANSACTIONS,
        "CREATE INDEX IF NOT EXISTS funds_tx_user ON funds_transactions (user_id, scheme_code, date)",
    )),
)

#: Part 20 of the owner-keys step (bara.memory.owner_keys): transactions keyed by ``(user_id, id)``.
_PG_REKEY = (
    "ALTER TABLE funds_transactions DROP CONSTRAINT funds_transactions_pkey",
    "ALTER TABLE funds_transactions ADD PRIMARY KEY (user_id, id)",
)

# SQLite cannot alter a primary key: move the table aside, create the owner-keyed one, copy.
_SQLITE_REKEY = (
    "ALTER TABLE funds_transactions RENAME TO funds_transactions_0102",
    """CREATE TABLE funds_transactions (
        id TEXT NOT NULL,
        user_id TEXT NOT NULL REFERENCES funds_users (id),
        scheme_code TEXT NOT NULL REFERENCES funds_schemes (scheme_code),
        date TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('SIP', 'LUMPSUM', 'REDEMPTION')),
        amount DOUBLE PRECISION NOT NULL CHECK (amount > 0),
        units DOUBLE PRECISION NOT NULL CHECK (units > 0),
        nav DOUBLE PRECISION NOT NULL CHECK (nav > 0),
        memo TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (user_id, id))""",
    "INSERT INTO funds_transactions SELECT id, user_id, scheme_code, date, kind, amount, units, nav, memo"
    " FROM funds_transactions_0102",
    "DROP TABLE funds_transactions_0102",
    "CREATE INDEX funds_tx_user ON funds_transactions (user_id, scheme_code, date)",
)

#: Portfolio transactions are per-user data; schemes, NAVs and the user directory are shared.
_RLS_TABLES = (("funds_transactions", "user_id"),)


def register() -> None:
    """The ``bara.plugins`` entry point ``funds``: this domain's tables, its part of the owner-keys step
    and row-level security, registered with the store (positions: :mod:`bara.store.registry`)."""
    from bara.store.registry import OWNER_KEYS, SCHEMA, register_policies, register_step

    for rank, (name, statements) in enumerate(FUNDS_MIGRATIONS, start=20):
        register_step(name, statements, phase=SCHEMA, rank=rank)
    register_policies("0103_pg_funds_rls", _RLS_TABLES, rank=20)
    register_step("0005_owner_keys", _SQLITE_REKEY, phase=OWNER_KEYS, rank=30, part=20, backends=("sqlite",))
    register_step("0005_owner_keys", _PG_REKEY, phase=OWNER_KEYS, rank=30, part=20, backends=("postgres",))
    register_policies("0104_pg_funds_shared_read_only", _RLS_TABLES, rank=20, shared_read_only=True)
