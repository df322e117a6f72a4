"""The schema is ready for sharding by owner (docs/scaling.md): every per-user table's primary key and
every unique constraint include its owner column (``user_id`` or ``owner``), on both backends.

A per-user table is any table with an owner column. On SQLite, ``documents`` and ``chunks`` keep
their rowid keys (FTS5 points at the chunk rowid); their other unique constraints still lead with
the owner. PostgreSQL, the Citus target, has no exception.
"""

from __future__ import annotations

from bara.store.sqlite import SQLiteStore

OWNER_COLUMNS = ("user_id", "owner")
SQLITE_ROWID_TABLES = {"documents", "chunks"}
PER_USER = {"conversations", "messages", "profile", "documents", "chunks", "scope_generation",
            "funds_transactions", "serve_keys", "serve_traces", "serve_threads"}


def _sqlite_keys(store: SQLiteStore) -> dict[str, tuple[str, list[tuple[str, list[str]]]]]:
    """table -> (owner column, [(constraint name, columns)]) for PK and unique indexes."""
    out = {}
    tables = [r[0] for r in store.query("SELECT name FROM sqlite_master WHERE type='table' AND sql NOT LIKE "
                                        "'CREATE VIRTUAL%' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts%'")]
    for table in tables:
        info = store.query(f'PRAGMA table_info("{table}")')
        owner = next((c[1] for c in info if c[1] in OWNER_COLUMNS), None)
        if owner is None:
            continue
        pk = [c[1] for c in sorted(info, key=lambda c: c[5]) if c[5]]
        constraints = [("primary key", pk)]
        for idx in store.query(f'PRAGMA index_list("{table}")'):
            if idx[2]:  # unique
                cols = [r[2] for r in store.query(f'PRAGMA index_info("{idx[1]}")')]
                constraints.append((idx[1], cols))
        out[table] = (owner, constraints)
    return out


def test_sqlite_per_user_keys_include_the_owner(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        keys = _sqlite_keys(store)
    finally:
        store.close()
    assert PER_USER <= set(keys)
    for table, (owner, constraints) in keys.items():
        for name, cols in constraints:
            if table in SQLITE_ROWID_TABLES and name == "primary key":
                assert cols == ["id"]  # the rowid alias (see the module docstring)
                continue
            assert owner in cols, f"{table}: {name} {cols} lacks {owner}"


PG_KEYS = """
SELECT c.relname, ic.relname, i.indisprimary,
       ARRAY(SELECT a.attname FROM unnest(i.indkey) k JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k)
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND (i.indisunique OR i.indisprimary)"""

PG_OWNER_TABLES = """
SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = %s AND column_name IN ('user_id', 'owner')"""


def test_postgres_per_user_keys_include_the_owner(pg_store_factory, pg_schema, pg_server_urls):
    import psycopg

    pg_store_factory(dim=384)  # migrates the fresh schema
    with psycopg.connect(pg_server_urls.owner_url) as conn:
        owners = dict(conn.execute(PG_OWNER_TABLES, (pg_schema,)).fetchall())
        keys = conn.execute(PG_KEYS, (pg_schema,)).fetchall()
    assert PER_USER - {"scope_generation"} <= set(owners)  # scope_generation is SQLite's vector-cache clock
    checked = set()
    for table, index, primary, cols in keys:
        if table in owners:
            assert owners[table] in cols, f"{table}: {index} {cols} lacks {owners[table]}"
            checked.add(table) if primary else None
    assert checked == set(owners)  # every per-user table has a primary key, and it was checked
