"""The hybrid search statement's placeholder parse is cached by psycopg (issue 33: CPU per PostgreSQL turn).

psycopg converts ``%(name)s`` placeholders to ``$n`` with a regular-expression split and caches the result
only for statements up to ``MAX_CACHED_STATEMENT_LENGTH`` bytes; the hybrid search is longer, so without
``bara.store.postgres`` raising that limit every search is re-parsed. No server needed: the conversion is
client-side."""

from __future__ import annotations

import re
from typing import LiteralString, cast

import pytest

pytest.importorskip("psycopg")

from psycopg import _queries  # noqa: E402
from psycopg.adapt import Transformer  # noqa: E402

import bara.store.postgres  # noqa: E402,F401 - raises the limit at import
from bara.store import pg_sql  # noqa: E402


@pytest.mark.parametrize("rank", sorted(pg_sql.LEXICAL_RANKS))
def test_each_hybrid_variant_is_parsed_once(rank: str) -> None:
    statement = cast(LiteralString, pg_sql.hybrid(rank))
    assert len(statement.encode()) > 4096  # longer than psycopg's own limit: the case this is about
    params = {name: 1 for name in set(re.findall(r"%\((\w+)\)s", statement))}
    _queries.PostgresQuery(Transformer()).convert(statement, params)  # parsed (or already cached)
    before = _queries._query2pg.cache_info()
    for _ in range(3):
        query = _queries.PostgresQuery(Transformer())
        query.convert(statement, params)
        assert b"%(" not in query.query and b"$1" in query.query
    after = _queries._query2pg.cache_info()
    assert after.hits - before.hits == 3 and after.misses == before.misses
