"""PostgreSQL text of the store: core schema, row-level security and the one-statement hybrid search.

Full-text choice: the ``tsvector`` is built with the ``simple`` configuration over text already
analysed by :mod:`bara.text.lexical` (the same stems and stopwords as the SQLite FTS5 index),
so both backends match the same terms for the same query; ``websearch_to_tsquery`` joins the
request's analysed terms with ``or`` and never raises on user syntax.

Row-level security: every policy compares the row's owner with the transaction-local setting
``bara.owners`` (a JSON array of owner ids, or ``*`` for trusted maintenance SQL). An unset or empty
setting shows no rows at all: a connection that forgot its scope fails closed.

Shared rows are read-only in a user's scope (steps ``*_shared_read_only``): a user's turn reads with
``bara.owners = ["", "<user>"]`` (the knowledge base's owner is ``SHARED``, the empty string), but it
may write, update or delete only rows of a non-empty owner in its scope. Only trusted maintenance SQL
(``*``: ingest, migrations) writes shared rows.
"""

from __future__ import annotations

import functools

from bara.store import pg_lexical

OWNERS_FUNCTION = """CREATE FUNCTION bara_owners() RETURNS text[] LANGUAGE sql STABLE AS $fn$
    SELECT CASE WHEN s IS NULL OR s IN ('', '*') THEN ARRAY[]::text[]
                ELSE ARRAY(SELECT jsonb_array_elements_text(s::jsonb)) END
    FROM (SELECT current_setting('bara.owners', true) AS s) setting $fn$"""


def policy(table: str, column: str) -> tuple[str, ...]:
    """Enable and force RLS on ``table`` with one policy over ``column`` (names are ours, not users')."""
    check = (f"((SELECT current_setting('bara.owners', true)) = '*'"
             f" OR {column} = ANY ((SELECT bara_owners())::text[]))")
    return (f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY {table}_owner ON {table} USING {check} WITH CHECK {check}")


def core_statements(dim: int) -> tuple[str, ...]:
    if not isinstance(dim, int) or not 1 <= dim <= 2000:
        raise ValueError(f"embedding dimension must be an integer in 1..2000 (HNSW limit), not {dim!r}")
    return (
        """CREATE TABLE documents (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            owner TEXT NOT NULL,
            collection TEXT NOT NULL,
            source TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            content_hash TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            updated_at DOUBLE PRECISION NOT NULL,
            UNIQUE (owner, collection, source))""",
        f"""CREATE TABLE chunks (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            collection TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            text TEXT NOT NULL,
            section TEXT NOT NULL DEFAULT '',
            title TEXT NOT NULL DEFAULT '',
            start_char INTEGER NOT NULL,
            end_char INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            body_terms TEXT NOT NULL,
            heading_terms TEXT NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('simple', heading_terms), 'A') ||
                setweight(to_tsvector('simple', body_terms), 'D')) STORED,
            embedding vector({dim}) NOT NULL)""",
        "CREATE INDEX chunks_scope ON chunks (owner, collection)",
        "CREATE INDEX chunks_doc ON chunks (doc_id)",
        "CREATE INDEX chunks_tsv ON chunks USING gin (tsv)",
        "CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding vector_cosine_ops)",
        "CREATE INDEX documents_owner ON documents (owner, collection)",
        OWNERS_FUNCTION,
        *policy("documents", "owner"),
        *policy("chunks", "owner"),
    )


def shared_read_only(table: str, column: str) -> tuple[str, ...]:
    """Replace ``{table}_owner`` by per-command policies: reads as before; writes never to a shared row.

    A user scope lists ``SHARED`` ('') so the user can read the knowledge base; without this split
    the same list let a user path INSERT (or UPDATE/DELETE) rows owned by the knowledge base.
    """
    setting = "(SELECT current_setting('bara.owners', true))"
    owners = "((SELECT bara_owners())::text[])"
    read = f"({setting} = '*' OR {column} = ANY {owners})"
    write = f"({setting} = '*' OR ({column} <> '' AND {column} = ANY {owners}))"
    return (f"DROP POLICY IF EXISTS {table}_owner ON {table}",
            f"CREATE POLICY {table}_read ON {table} FOR SELECT USING {read}",
            f"CREATE POLICY {table}_insert ON {table} FOR INSERT WITH CHECK {write}",
            f"CREATE POLICY {table}_update ON {table} FOR UPDATE USING {write} WITH CHECK {write}",
            f"CREATE POLICY {table}_delete ON {table} FOR DELETE USING {write}")


MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS bara_migrations (
    seq INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    applied_at DOUBLE PRECISION NOT NULL)"""

# Row-level security lets the planner use an index only for leakproof operators, and PostgreSQL does
# not mark the full-text match (tsvector @@ tsquery) leakproof: without the mark the GIN index is never
# used under a policy and every search tests every row of its scope. The match returns a boolean and
# raises no error that depends on a row's value, so it reveals nothing a policy hides. Only a superuser
# may mark it, once per database: `bara db start` does; `bara db migrate` does when its role is a superuser,
# and otherwise says who must run this (docs/postgres.md).
LEAKPROOF_MATCH = "ALTER FUNCTION ts_match_vq(tsvector, tsquery) LEAKPROOF"

DELETE_DOCUMENT = "DELETE FROM documents WHERE owner=%s AND collection=%s AND source=%s"

# Scope and search knobs for one transaction, sent in the same pipeline as the statement.
SET_SCOPE = "SELECT set_config('bara.owners', %s, true)"
SET_SEARCH = ("SELECT set_config('bara.owners', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),"
              " set_config('hnsw.ef_search', %s, true), set_config('hnsw.max_scan_tuples', %s, true)")

# Lexical rank expressions (``pg_lexical_rank``). ``ts_rank_cd`` (cover density) was the first choice;
# ``ts_rank`` reads each matching row's lexeme weights only and is several times cheaper per row;
# ``ts_rank_log`` (the default) is ``ts_rank`` divided by 1 + log(the row's length).
LEXICAL_RANKS = {
    "ts_rank_cd": "ts_rank_cd(%(rank_weights)s::float4[], c.tsv, q.query)",
    "ts_rank": "ts_rank(%(rank_weights)s::float4[], c.tsv, q.query)",
    "ts_rank_log": "ts_rank(%(rank_weights)s::float4[], c.tsv, q.query, 1)",
}

# One statement: both arms, weighted RRF, per-arm ranks/scores and the cosine of every candidate.
# Lexical arm: exact below ``pg_lexical_bounded_min_rows`` rows in the scope, bounded above (the
# rows of the query's rarest terms only, :mod:`bara.store.pg_lexical`).
# Dense arm: HNSW (iterative scan) over the shared scope; if that returns fewer than the limit, an
# exact pass over the same scope runs (one-time filter, so it costs nothing otherwise). Per-user owners
# use exact distance ((d) + 0 keeps the planner off the index) while they hold fewer than
# ``private_exact_max`` rows in the searched collections (counted by the scope index, at most that
# many), and the same HNSW-then-exact pair as the shared scope above that size. A small private scope's
# vectors are in ``flat``, not in the graph (:mod:`bara.store.pg_flat`): the exact passes rank
# ``coalesce(embedding, flat)``, and above that size ``private_flat`` ranks the flat rows (partial index).
# The cosine of a lexical-only candidate is read by primary-key look-up (a join let the planner scan
# the whole table to hash it: most of a search's time at 10^4 chunks and more).
_HYBRID = """
WITH{lexical}
lex_ranked AS (SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS rank FROM lex),
shared_ann AS MATERIALIZED (
    SELECT c.id, c.embedding <=> %(vector)s::vector AS dist FROM chunks c
    WHERE %(dense)s AND %(has_shared)s AND c.owner = '' AND c.collection = ANY (%(collections)s::text[])
    ORDER BY c.embedding <=> %(vector)s::vector LIMIT %(limit)s),
shared_exact AS MATERIALIZED (
    SELECT c.id, (c.embedding <=> %(vector)s::vector) + 0 AS dist FROM chunks c
    WHERE %(dense)s AND %(has_shared)s AND (SELECT count(*) FROM shared_ann) < %(limit)s
      AND c.owner = '' AND c.collection = ANY (%(collections)s::text[])
    ORDER BY 2, c.id LIMIT %(limit)s),
private_size AS MATERIALIZED (
    SELECT count(*) AS n FROM (SELECT 1 FROM chunks c WHERE %(dense)s AND c.owner = ANY (%(private)s::text[])
        AND c.collection = ANY (%(collections)s::text[]) LIMIT %(private_exact_max)s) s),
private_ann AS MATERIALIZED (
    SELECT c.id, c.embedding <=> %(vector)s::vector AS dist FROM chunks c
    WHERE %(dense)s AND (SELECT n FROM private_size) >= %(private_exact_max)s
      AND c.owner = ANY (%(private)s::text[]) AND c.collection = ANY (%(collections)s::text[])
    ORDER BY c.embedding <=> %(vector)s::vector LIMIT %(limit)s),
private_flat AS MATERIALIZED (
    SELECT c.id, (c.flat <=> %(vector)s::vector) + 0 AS dist FROM chunks c
    WHERE %(dense)s AND (SELECT n FROM private_size) >= %(private_exact_max)s AND c.embedding IS NULL
      AND c.owner = ANY (%(private)s::text[]) AND c.collection = ANY (%(collections)s::text[])
    ORDER BY 2, c.id LIMIT %(limit)s),
private_exact AS MATERIALIZED (
    SELECT c.id, (coalesce(c.embedding, c.flat) <=> %(vector)s::vector) + 0 AS dist FROM chunks c
    WHERE %(dense)s AND (SELECT count(*) FROM private_ann) < %(limit)s
      AND c.owner = ANY (%(private)s::text[]) AND c.collection = ANY (%(collections)s::text[])
    ORDER BY 2, c.id LIMIT %(limit)s),
den AS (
    SELECT id, min(dist) AS dist FROM (
        SELECT * FROM shared_ann UNION ALL SELECT * FROM shared_exact
        UNION ALL SELECT * FROM private_ann UNION ALL SELECT * FROM private_flat
        UNION ALL SELECT * FROM private_exact) u
    GROUP BY id ORDER BY 2, id LIMIT %(limit)s),
den_ranked AS (SELECT id, 1 - dist AS score, row_number() OVER (ORDER BY dist, id) AS rank FROM den),
fused AS MATERIALIZED (
    SELECT coalesce(l.id, d.id) AS id, l.rank AS lrank, l.score AS lscore, d.rank AS drank, d.score AS dscore,
           coalesce(%(w_lex)s / (%(rrf_k)s + l.rank), 0) + coalesce(%(w_den)s / (%(rrf_k)s + d.rank), 0) AS fused,
           coalesce(l.rank, (SELECT count(*) FROM lex) + d.rank) AS first_seen
    FROM lex_ranked l FULL JOIN den_ranked d ON d.id = l.id)
SELECT f.id, f.fused, f.lrank, f.lscore, f.drank, f.dscore,
       CASE WHEN NOT %(has_vector)s THEN 0 WHEN f.dscore IS NOT NULL THEN f.dscore
            ELSE (SELECT 1 - (coalesce(c.embedding, c.flat) <=> %(vector)s::vector) FROM chunks c WHERE c.id = f.id)
       END AS similarity,
       (SELECT count(*) FROM lex) AS n_lex, (SELECT count(*) FROM den) AS n_den
FROM fused f
ORDER BY f.fused DESC, least(f.lrank, f.drank), f.first_seen, f.id
"""


@functools.lru_cache(maxsize=8)
def hybrid(rank: str) -> str:
    """The hybrid statement ranking its lexical arm by ``rank`` (a key of :data:`LEXICAL_RANKS`)."""
    return _HYBRID.replace("{lexical}", pg_lexical.LEXICAL_CTES).replace("{rank}", LEXICAL_RANKS[rank])


HYBRID = hybrid("ts_rank_log")  # the default pg_lexical_rank


def cache_hybrid_parse() -> None:
    """Let psycopg cache the placeholder parse of the hybrid search statement.

    psycopg caches a statement's conversion (``%(name)s`` to ``$n``) only up to
    ``MAX_CACHED_STATEMENT_LENGTH`` bytes (4,096: long statements are mostly generated and rarely repeat).
    The hybrid search (~5.4 kB, every rank variant) runs on every turn, and re-parsing it cost ~0.3 ms of CPU
    a search. The limit is raised to the longest variant; without the attribute (another psycopg) nothing
    changes but that cost (``tests/store/test_store_pg_statements.py`` fails then)."""
    from psycopg import _queries

    longest = max(len(hybrid(rank).encode()) for rank in LEXICAL_RANKS)
    if isinstance(getattr(_queries, "MAX_CACHED_STATEMENT_LENGTH", None), int):
        _queries.MAX_CACHED_STATEMENT_LENGTH = max(_queries.MAX_CACHED_STATEMENT_LENGTH, longest)


GET_CHUNKS = """SELECT c.id, c.text, d.source, c.section, c.title, c.collection, c.owner, c.ordinal,
    c.start_char, c.end_char, d.title, d.meta FROM chunks c JOIN documents d ON d.id = c.doc_id
    WHERE c.id = ANY (%s::bigint[])"""

INSERT_DOCUMENT = """INSERT INTO documents (owner, collection, source, title, content_hash, meta, updated_at)
    VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id"""

# A document's chunks go in the pipeline of its INSERT: their doc_id is the id that INSERT just drew from
# the documents' identity sequence on this connection (currval is per session, so no other writer's).
INSERT_CHUNK = """INSERT INTO chunks (doc_id, owner, collection, ordinal, text, section, title, start_char,
    end_char, content_hash, body_terms, heading_terms, embedding)
    VALUES (currval(pg_get_serial_sequence('documents', 'id')), %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"""


@functools.lru_cache(maxsize=4096)  # bara's SQL texts are few and reused every turn; the scan is pure Python
def to_pyformat(sql: str) -> str:
    """Translate ``?`` placeholders to psycopg's ``%s`` and escape literal ``%``.

    ``?`` inside string literals, quoted identifiers and comments is left alone; a ``%`` anywhere is
    doubled (psycopg reads the whole text). The jsonb ``?`` operators cannot be written this way: use
    ``jsonb_exists()`` instead.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        end = _quoted_end(sql, i)
        if end > i:
            out.append(sql[i:end].replace("%", "%%"))
            i = end
            continue
        out.append("%s" if ch == "?" else "%%" if ch == "%" else ch)
        i += 1
    return "".join(out)


def _quoted_end(sql: str, i: int) -> int:
    """End of the literal/identifier/comment starting at ``i``, or ``i`` when none starts there."""
    ch, nxt = sql[i], sql[i + 1: i + 2]
    if ch in ("'", '"'):
        j = i + 1
        while j < len(sql):
            if sql[j] == ch:
                if sql[j + 1: j + 2] == ch:  # doubled quote inside
                    j += 2
                    continue
                return j + 1
            j += 1
        return len(sql)
    if ch == "-" and nxt == "-":
        j = sql.find("\n", i)
        return len(sql) if j < 0 else j
    if ch == "/" and nxt == "*":
        j = sql.find("*/", i + 2)
        return len(sql) if j < 0 else j + 2
    return i
