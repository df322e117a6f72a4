"""The store's registration seam: owners register their migration steps; the result is pinned.

The pins below were taken from main before the seam existed (8278e80): the same step names, order,
SQL text and a new SQLite store's ``sqlite_master``. PostgreSQL's catalog follows from its statements,
which are pinned the same way (tests/store/test_store_postgres.py applies them to a live server).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tomllib
from pathlib import Path

import pytest

from bara import plugins
from bara.store import registry
from bara.store.migrations import postgres_migrations, sqlite_migrations
from bara.store.sqlite import SQLiteStore

SQLITE_NAMES = ["0001_core", "0002_memory", "0010_episodic", "0015_episodic_names", "0101_funds_schemes_navs",
                "0102_funds_users_transactions", "0201_store_meta", "0202_sqlite_memory_fts", "0005_owner_keys"]
PG_NAMES = ["0001_core", "0002_memory", "0010_episodic", "0015_episodic_names", "0101_funds_schemes_navs",
            "0102_funds_users_transactions", "0201_store_meta", "0003_pg_memory_rls", "0011_pg_episodic_rls",
            "0016_pg_episodic_names_rls", "0103_pg_funds_rls", "0005_owner_keys", "0006_pg_serve_rls",
            "0012_pg_core_shared_read_only", "0013_pg_memory_shared_read_only", "0014_pg_episodic_shared_read_only",
            "0017_pg_episodic_names_shared_read_only", "0104_pg_funds_shared_read_only", "0030_pg_chunks_tsv_inline",
            "0031_pg_chunk_terms", "0032_pg_chunk_terms_lazy", "0033_pg_flat_vectors"]
# Steps added after the pins below were taken (issue 16: the episodic name index; round 10: users'
# full-text rows in their own SQLite table); the pins still hold for every other step, which proves no
# released step was edited.
EPISODIC_NAMES = {"0015_episodic_names", "0016_pg_episodic_names_rls", "0017_pg_episodic_names_shared_read_only"}
MEMORY_FTS = {"0202_sqlite_memory_fts"}
TSV_INLINE = {"0030_pg_chunks_tsv_inline"}  # the tsvector kept in the row (docs/postgres.md)
CHUNK_TERMS = {"0031_pg_chunk_terms"}  # per-scope term frequencies of the bounded full-text arm (issue 34)
CHUNK_TERMS_LAZY = {"0032_pg_chunk_terms_lazy"}  # ... per term only in scopes that can be large (issue 33)
FLAT_VECTORS = {"0033_pg_flat_vectors"}  # small private scopes' vectors outside the HNSW graph (issue 33)
ADDED = EPISODIC_NAMES | MEMORY_FTS | TSV_INLINE | CHUNK_TERMS | CHUNK_TERMS_LAZY | FLAT_VECTORS
PINNED = {
    "sqlite": "2419ad1380a997be64910f0ebe8bddfa9819fe8cdc1ce2ea8a115c98b5bf69a8",
    "pg": "d083379b2e406c9dcb57872d4ae12621072e1cebaa9135cd7d8665f9925a3d85",
    "pg512": "b58ec5ef5cacef0268729da429d015068c2549696dcaf0c0d698cde7e1bd0351",
}
SQLITE_MASTER = "7c9bd07df3581657bc05977d9142d519c8d2d68d7eb0285e8dc5832c42c1c39a"
# The added steps' own SQL (the runtime statements of bara.memory.episodic_names share its key
# expression: changing one would edit a released step).
PINNED_ADDED = {
    "sqlite": "23b4aeb49512047a363627f2281081123ac955b47e8390d0a781cfabe804ce82",
    "pg": "3eccc49e7cf7e818e4f3229042deeb217082246b2c0300439a7c108bb5fab1ab",
}
PINNED_CHUNK_TERMS = "a745ba0f421bc1aaa259c979552de4f343649d73311d4169c19f1b1cc5f8495f"
PINNED_CHUNK_TERMS_LAZY = "0cffe636c0f0d0895150c1f2bfc036b95bbfb2ab1887a4ef7bfddb6b8c975f7a"
PINNED_FLAT_VECTORS = "398decef053b103abb74cea4b0595ecc190f0be125676bdb8f459ccdef9c84e4"
PINNED_TSV_INLINE = "43c71f3ac36517ae41dbe1f9c187435b4c385856672a46678d2d437844c49857"
PINNED_MEMORY_FTS = "4b54350eab851bd47014a14ea2fae179c31eaf7aba5539b1cc0eba80207e554b"
MEMORY_FTS_TABLES = {"memory_fts", "memory_fts_config", "memory_fts_content", "memory_fts_data",
                     "memory_fts_docsize", "memory_fts_idx"}


def _digest(steps) -> str:
    """The pinned digest of the steps released before ``ADDED``."""
    return hashlib.sha256(json.dumps([[m.name, list(m.statements)] for m in steps if m.name not in ADDED])
                          .encode()).hexdigest()


def test_migration_names_and_sql_are_unchanged():
    assert [m.name for m in sqlite_migrations()] == SQLITE_NAMES
    assert [m.name for m in postgres_migrations()] == PG_NAMES
    assert _digest(sqlite_migrations()) == PINNED["sqlite"]
    assert _digest(postgres_migrations()) == PINNED["pg"]
    assert _digest(postgres_migrations(512)) == PINNED["pg512"]


def test_added_steps_are_pinned_too():
    def digest(steps, added=EPISODIC_NAMES) -> str:
        return hashlib.sha256(json.dumps([[m.name, list(m.statements)] for m in steps if m.name in added])
                              .encode()).hexdigest()

    assert digest(sqlite_migrations()) == PINNED_ADDED["sqlite"]
    assert digest(postgres_migrations()) == digest(postgres_migrations(512)) == PINNED_ADDED["pg"]
    assert digest(sqlite_migrations(), MEMORY_FTS) == PINNED_MEMORY_FTS
    assert not MEMORY_FTS & {m.name for m in postgres_migrations()}  # PostgreSQL ranks without IDF
    assert digest(postgres_migrations(), TSV_INLINE) == PINNED_TSV_INLINE
    assert digest(postgres_migrations(), CHUNK_TERMS) == digest(postgres_migrations(512), CHUNK_TERMS) == PINNED_CHUNK_TERMS
    assert (digest(postgres_migrations(), CHUNK_TERMS_LAZY) == digest(postgres_migrations(512), CHUNK_TERMS_LAZY)
            == PINNED_CHUNK_TERMS_LAZY)
    assert (digest(postgres_migrations(), FLAT_VECTORS) == digest(postgres_migrations(512), FLAT_VECTORS)
            == PINNED_FLAT_VECTORS)


def test_new_sqlite_store_schema_is_unchanged(tmp_path):
    SQLiteStore(tmp_path / "s.db")
    con = sqlite3.connect(tmp_path / "s.db")
    rows = con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    applied = [name for (name,) in con.execute("SELECT name FROM bara_migrations ORDER BY seq")]
    assert applied == SQLITE_NAMES
    assert {r[1] for r in rows if r[2] == "episodic_names"} == {"episodic_names", "episodic_names_prefix",
                                                                 "sqlite_autoindex_episodic_names_1"}
    assert {r[1] for r in rows if r[2].startswith("memory_fts")} == MEMORY_FTS_TABLES
    before = [list(r) for r in rows if r[2] != "episodic_names" and r[2] not in MEMORY_FTS_TABLES]  # as pinned
    assert hashlib.sha256(json.dumps(before).encode()).hexdigest() == SQLITE_MASTER


def test_order_does_not_depend_on_registration_order(monkeypatch):
    parts = dict(registry._PARTS)
    before = registry.steps_for("postgres")
    monkeypatch.setattr(registry, "_PARTS", dict(reversed(list(parts.items()))))
    assert registry.steps_for("postgres") == before


def test_same_part_twice_is_a_no_op_and_different_sql_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "_PARTS", {})
    monkeypatch.setattr(plugins, "_loaded", set(plugins.declared()))  # no plug-ins: only what we register
    registry.register_step("0900_x", ["CREATE TABLE x (a)"], phase=registry.SCHEMA, rank=50)
    registry.register_step("0900_x", ["CREATE TABLE x (a)"], phase=registry.SCHEMA, rank=50)
    assert registry.steps_for("sqlite") == [("0900_x", ("CREATE TABLE x (a)",))]
    with pytest.raises(ValueError, match="different SQL"):
        registry.register_step("0900_x", ["CREATE TABLE x (b)"], phase=registry.SCHEMA, rank=50)


def test_parts_of_one_step_join_in_part_order(monkeypatch):
    monkeypatch.setattr(registry, "_PARTS", {})
    monkeypatch.setattr(plugins, "_loaded", set(plugins.declared()))
    registry.register_step("0901_y", ["B"], phase=registry.OWNER_KEYS, rank=1, part=20)
    registry.register_step("0900_z", ["Z"], phase=registry.SCHEMA, rank=99)
    registry.register_step("0901_y", ["A"], phase=registry.OWNER_KEYS, rank=1, part=0)
    assert registry.steps_for("sqlite") == [("0900_z", ("Z",)), ("0901_y", ("A", "B"))]


def test_builtin_plugins_match_the_declared_entry_points():
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["bara.plugins"] == plugins.BUILTIN
    for target in plugins.BUILTIN.values():
        assert callable(plugins.resolve(target))


def test_an_installed_entry_point_plugin_is_loaded(monkeypatch):
    calls = []

    class EP:
        name, value = "extra", "tests.store.test_store_registry:_extra_register"

    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: [EP] if group == plugins.GROUP else [])
    monkeypatch.setattr(plugins, "_loaded", set(plugins.BUILTIN))
    monkeypatch.setattr(registry, "_PARTS", {})
    monkeypatch.setattr(__import__("tests.store.test_store_registry", fromlist=["_"]), "_CALLS", calls)
    registry.steps_for("sqlite")
    assert calls == ["extra"]


_CALLS: list[str] = []


def _extra_register() -> None:
    _CALLS.append("extra")
