"""PostgreSQL's full-text arm on a large scope: rank only the rows of the query's rarest terms.

The exact arm (``lex_exact`` in :mod:`bara.store.pg_sql`) ranks every row matching any query term
with the rank function ``pg_lexical_rank`` names (``ts_rank_log``: ``ts_rank(w, tsv, q, 1)``, the sum
over query terms of a weighted, position-discounted count, divided by the number of query terms and
by ``1 + log`` of the row's length) and keeps the best ``limit``. PostgreSQL has no top-k for a rank,
so its cost is the number of matching rows: an ``or`` of 6-12 SciFact terms matches 22-52 % of a
10^5-chunk knowledge base (docs/scaling.md), ~5 us a row to read and rank.

The bounded arm is the *quit* strategy of A. Moffat and J. Zobel, "Self-indexing inverted files for
fast text retrieval", ACM TOIS 14(4), 1996: process the query's terms in increasing document frequency
and stop before the accumulated postings pass a limit. Here, with ``df(t)`` the rows of the searched
scope holding term ``t`` and ``C`` the limit (``pg_lexical_candidates``)::

    order the query's terms t_1..t_m by (df ascending, query position); take the longest prefix
    t_1..t_j with  df(t_1) + ... + df(t_j) <= C,  and at least t_1;
    candidates = rows matching  t_1 or ... or t_j  (the GIN index: at most max(C, df(t_1)) rows);
    score(row) = the same rank expression over the *whole* query; keep the best ``limit``.

A candidate's score is the exact arm's score for that row, and the candidates are a subset of the
exact arm's matches, so what changes is only which rows are ranked: a row holding none of the rarest
terms (only common ones) is never a candidate. ``ts_rank`` weighs every term alike (no IDF), so such a
row can be in the exact top 10; the rare terms are what a claim is about, and the hybrid fusion
re-ranks with the dense arm. Not exact: docs/benchmarks.md ("PostgreSQL bounded lexical arm") gives
its overlap with the exact arm and its nDCG against the exact arm's.

The bounded arm runs only when the scope (the searched collections of every owner in the scope) holds
at least ``pg_lexical_bounded_min_rows`` rows: below, the exact arm's statement and plan are unchanged.

**Document frequencies**: ``chunk_terms (owner, collection, term, df)``, one row per lexeme of
``chunks.tsv`` per scope, plus ``term = ''`` holding the scope's row count; kept by triggers on
``chunks`` (statement-level with transition tables for INSERT and DELETE, a row trigger for an UPDATE
of the analysed text, owner or collection) and backfilled by the step that creates it. Row-level
security as on ``chunks`` (shared rows read-only in a user's scope): a user's search reads only its
scope's frequencies. A writer updates the rows of its documents' terms under row locks held to its
commit: writers of one (owner, collection) are serialised on its row-count row, and two transactions
writing two scopes in opposite orders can deadlock (PostgreSQL aborts one: ``StoreBusyError``, nothing
of it stored; :mod:`bara.store.pg_faults`). Each insert costs an upsert of its row's lexemes: ~2.2x a
one-chunk document's write in its own transaction, 6-8x in a transaction of 256 (docs/benchmarks.md);
a bulk load may disable :data:`INSERT_TRIGGER` and run :func:`rebuild_statements` after it. Since
``0032_pg_chunk_terms_lazy`` the per-term rows are kept only for scopes of ``pg_lexical_terms_min_rows``
rows or more (marked by ``term = ' '``); a smaller scope keeps its row count, and a bounded search counts
its terms from its rows (``lex_small``).
"""

from __future__ import annotations

TABLE = """CREATE TABLE chunk_terms (
    owner TEXT NOT NULL,
    collection TEXT NOT NULL,
    term TEXT NOT NULL,
    df BIGINT NOT NULL,
    PRIMARY KEY (owner, collection, term))"""

# Every lexeme of a row's tsvector, and '' (the row itself: the scope's row count).
_TERMS = "unnest(array_append(tsvector_to_array({row}.tsv), ''::text))"

_ADD = f"""INSERT INTO chunk_terms AS t (owner, collection, term, df)
        SELECT owner, collection, term, count(*) FROM (
            SELECT n.owner, n.collection, {_TERMS.format(row="n")} AS term FROM bara_new n) s
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (owner, collection, term) DO UPDATE SET df = t.df + EXCLUDED.df"""

_GONE = f"""(SELECT owner, collection, term, count(*) AS n FROM (
            SELECT o.owner, o.collection, {_TERMS.format(row="o")} AS term FROM bara_old o) s
        GROUP BY 1, 2, 3)"""

# Statement-level: one grouped upsert (or decrement) per statement, in key order (no lock-order
# deadlock between two statements of one multi-row write).
APPLY_FUNCTION = f"""CREATE FUNCTION bara_chunk_terms_apply() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_ADD};
    ELSE
        UPDATE chunk_terms t SET df = t.df - g.n FROM {_GONE} g
            WHERE t.owner = g.owner AND t.collection = g.collection AND t.term = g.term;
        DELETE FROM chunk_terms t USING {_GONE} g
            WHERE t.owner = g.owner AND t.collection = g.collection AND t.term = g.term AND t.df <= 0;
    END IF;
    RETURN NULL;
END $fn$"""

# A row whose analysed text, owner or collection changes (bara itself updates only embeddings).
UPDATE_FUNCTION = """CREATE FUNCTION bara_chunk_terms_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF OLD.tsv IS DISTINCT FROM NEW.tsv OR OLD.owner <> NEW.owner OR OLD.collection <> NEW.collection THEN
        UPDATE chunk_terms t SET df = t.df - 1 WHERE t.owner = OLD.owner AND t.collection = OLD.collection
            AND t.term = ANY (array_append(tsvector_to_array(OLD.tsv), ''::text));
        DELETE FROM chunk_terms t WHERE t.owner = OLD.owner AND t.collection = OLD.collection
            AND t.term = ANY (array_append(tsvector_to_array(OLD.tsv), ''::text)) AND t.df <= 0;
        INSERT INTO chunk_terms AS t (owner, collection, term, df)
            SELECT NEW.owner, NEW.collection, x, 1 FROM unnest(array_append(tsvector_to_array(NEW.tsv), ''::text)) x
            ORDER BY x ON CONFLICT (owner, collection, term) DO UPDATE SET df = t.df + 1;
    END IF;
    RETURN NULL;
END $fn$"""

INSERT_TRIGGER = "chunk_terms_insert"
TRIGGERS = (
    f"""CREATE TRIGGER {INSERT_TRIGGER} AFTER INSERT ON chunks REFERENCING NEW TABLE AS bara_new
        FOR EACH STATEMENT EXECUTE FUNCTION bara_chunk_terms_apply()""",
    """CREATE TRIGGER chunk_terms_delete AFTER DELETE ON chunks REFERENCING OLD TABLE AS bara_old
        FOR EACH STATEMENT EXECUTE FUNCTION bara_chunk_terms_apply()""",
    """CREATE TRIGGER chunk_terms_update AFTER UPDATE OF body_terms, heading_terms, owner, collection ON chunks
        FOR EACH ROW EXECUTE FUNCTION bara_chunk_terms_update()""",
)

# Every scope's frequencies from the rows (the step's backfill; a bulk load that disabled the insert
# trigger runs it again). Maintenance scope: the migration's transaction reads every owner's rows.
REBUILD = (
    "SELECT set_config('bara.owners', '*', true)",
    "DELETE FROM chunk_terms",
    f"""INSERT INTO chunk_terms (owner, collection, term, df)
        SELECT owner, collection, term, count(*) FROM (
            SELECT c.owner, c.collection, {_TERMS.format(row="c")} AS term FROM chunks c) s
        GROUP BY 1, 2, 3""",
)


def step_statements() -> tuple[str, ...]:
    """``0031_pg_chunk_terms``: the table, its row-level security, the triggers, the backfill."""
    from bara.store.pg_sql import shared_read_only

    return (TABLE, "ALTER TABLE chunk_terms ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE chunk_terms FORCE ROW LEVEL SECURITY", *shared_read_only("chunk_terms", "owner"),
            APPLY_FUNCTION, UPDATE_FUNCTION, *TRIGGERS, *REBUILD)


# A scope that keeps its per-term counts (0032, below) is marked by the row ``term = MARKER``.
MARKER = " "
_MIN_ROWS = "coalesce(nullif(current_setting('bara.terms_min_rows', true), '')::bigint, 0)"
_MARKED = ("EXISTS (SELECT 1 FROM chunk_terms m WHERE m.owner = {row}.owner AND m.collection = {row}.collection"
           f" AND m.term = '{MARKER}')")
_LEXEMES = "unnest(tsvector_to_array({row}.tsv))"
# The lazy trigger's statement that marks the scope ``s`` of its crossing loop (0033 extends the loop after it).
MARK_SCOPE = f"INSERT INTO chunk_terms (owner, collection, term, df) VALUES (s.owner, s.collection, '{MARKER}', 1);"


# The search's lexical CTEs (spliced into pg_sql's hybrid statement). ``lex_size``: rows in the scope,
# read only when the bounded arm is enabled; ``lex_small``: the query's lexemes counted from the rows of
# the scope's unmarked (small) parts (0032 above); ``lex_exact`` runs below ``lex_bounded_min`` rows,
# ``lex_bounded`` from there (one-time filters: the branch not taken costs nothing).
LEXICAL_CTES = """
lex_size AS MATERIALIZED (
    SELECT coalesce(sum(d.df), 0) AS n FROM chunk_terms d
    WHERE %(use_lexical)s AND %(lex_bounded)s AND d.term = ''
      AND d.owner = ANY (%(owners)s::text[]) AND d.collection = ANY (%(collections)s::text[])),
lex_small AS MATERIALIZED (
    SELECT x AS term, count(*) AS df FROM chunk_terms d
    JOIN chunks c ON c.owner = d.owner AND c.collection = d.collection,
    unnest(tsvector_to_array(c.tsv)) x
    WHERE (SELECT n FROM lex_size) >= %(lex_bounded_min)s AND d.term = ''
      AND d.owner = ANY (%(owners)s::text[]) AND d.collection = ANY (%(collections)s::text[])
      AND NOT """ + _MARKED.format(row="d") + """
      AND x = ANY (tsvector_to_array(to_tsvector('simple', array_to_string(%(terms)s::text[], ' '))))
    GROUP BY x),
lex_terms AS MATERIALIZED (
    SELECT t.term, t.ord, (SELECT coalesce(sum(d.df), 0) FROM chunk_terms d
        WHERE d.term = ANY (tsvector_to_array(to_tsvector('simple', t.term)))
          AND d.owner = ANY (%(owners)s::text[]) AND d.collection = ANY (%(collections)s::text[]))
        + (SELECT coalesce(sum(u.df), 0) FROM lex_small u
           WHERE u.term = ANY (tsvector_to_array(to_tsvector('simple', t.term)))) AS df
    FROM unnest(%(terms)s::text[]) WITH ORDINALITY t(term, ord)
    WHERE (SELECT n FROM lex_size) >= %(lex_bounded_min)s),
lex_pick AS MATERIALIZED (
    SELECT websearch_to_tsquery('simple', string_agg(term, ' or ' ORDER BY ord)) AS query FROM (
        SELECT term, ord, sum(df) OVER (ORDER BY df, ord) AS cum, row_number() OVER (ORDER BY df, ord) AS rn
        FROM lex_terms WHERE df > 0) s
    WHERE cum <= %(lex_candidates)s OR rn = 1),
lex_exact AS (
    SELECT c.id, {rank} AS score
    FROM chunks c, (SELECT websearch_to_tsquery('simple', %(query)s) AS query) q
    WHERE %(use_lexical)s AND (SELECT n FROM lex_size) < %(lex_bounded_min)s AND c.tsv @@ q.query
      AND c.owner = ANY (%(owners)s::text[]) AND c.collection = ANY (%(collections)s::text[])
    ORDER BY score DESC, c.id LIMIT %(limit)s),
lex_bounded AS (
    SELECT c.id, {rank} AS score
    FROM chunks c, (SELECT websearch_to_tsquery('simple', %(query)s) AS query) q
    WHERE %(use_lexical)s AND (SELECT n FROM lex_size) >= %(lex_bounded_min)s AND c.tsv @@ (SELECT query FROM lex_pick)
      AND c.owner = ANY (%(owners)s::text[]) AND c.collection = ANY (%(collections)s::text[])
    ORDER BY score DESC, c.id LIMIT %(limit)s),
lex AS MATERIALIZED (SELECT * FROM lex_exact UNION ALL SELECT * FROM lex_bounded),"""


# --- 0032: per-term counts only for scopes that can be large -------------------------------------------
#
# A scope (owner, collection) keeps its per-term counts once it holds ``bara.terms_min_rows`` rows (the
# pool sets it from ``pg_lexical_terms_min_rows`` on every connection; unset = 0, every scope, as 0031
# did) and is marked by the row ``term = ' '`` (never a lexeme: the parser splits on blanks). Below that
# a scope keeps only its row count (``term = ''``), so a write of a turn's Q&A or episodic row (a small
# per-user scope) costs one upsert instead of one per lexeme. The write that takes a scope over the
# threshold counts that scope's terms from its rows once and marks it; a search that ranks with the
# bounded arm counts an unmarked scope's terms from its rows (fewer than the threshold, by the row
# count). Order inside a write: the row-count rows first (in key order: they are the scopes' locks),
# then, in statements that see every writer committed before those locks, the terms of marked scopes.
LAZY_APPLY = f"""CREATE OR REPLACE FUNCTION bara_chunk_terms_apply() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    s record;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chunk_terms AS t (owner, collection, term, df)
            SELECT owner, collection, '', count(*) FROM bara_new GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (owner, collection, term) DO UPDATE SET df = t.df + EXCLUDED.df;
        INSERT INTO chunk_terms AS t (owner, collection, term, df)
            SELECT owner, collection, term, count(*) FROM (
                SELECT n.owner, n.collection, {_LEXEMES.format(row="n")} AS term FROM bara_new n
                WHERE {_MARKED.format(row="n")}) s
            GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
            ON CONFLICT (owner, collection, term) DO UPDATE SET df = t.df + EXCLUDED.df;
        FOR s IN SELECT d.owner, d.collection FROM chunk_terms d
                WHERE d.term = '' AND d.df >= {_MIN_ROWS} AND NOT {_MARKED.format(row="d")}
                  AND (d.owner, d.collection) IN (SELECT owner, collection FROM bara_new)
                ORDER BY 1, 2 LOOP
            INSERT INTO chunk_terms AS t (owner, collection, term, df)
                SELECT s.owner, s.collection, x, count(*) FROM chunks c, {_LEXEMES.format(row="c")} x
                WHERE c.owner = s.owner AND c.collection = s.collection GROUP BY x ORDER BY x
                ON CONFLICT (owner, collection, term) DO UPDATE SET df = EXCLUDED.df;
            {MARK_SCOPE}
        END LOOP;
    ELSE
        UPDATE chunk_terms t SET df = t.df - g.n FROM (
                SELECT owner, collection, count(*) AS n FROM bara_old GROUP BY 1, 2 ORDER BY 1, 2) g
            WHERE t.owner = g.owner AND t.collection = g.collection AND t.term = '';
        UPDATE chunk_terms t SET df = t.df - g.n FROM {_GONE} g
            WHERE t.owner = g.owner AND t.collection = g.collection AND t.term = g.term AND g.term <> ''
              AND {_MARKED.format(row="t")};
        DELETE FROM chunk_terms t USING {_GONE} g
            WHERE t.owner = g.owner AND t.collection = g.collection AND t.term = g.term AND t.df <= 0;
    END IF;
    RETURN NULL;
END $fn$"""

# An UPDATE of a row's analysed text, owner or collection: its lexemes move only in marked scopes.
_LAZY_UPDATE = f"""CREATE OR REPLACE FUNCTION bara_chunk_terms_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF OLD.tsv IS DISTINCT FROM NEW.tsv OR OLD.owner <> NEW.owner OR OLD.collection <> NEW.collection THEN
        UPDATE chunk_terms t SET df = t.df - 1 WHERE t.owner = OLD.owner AND t.collection = OLD.collection
            AND (t.term = '' OR (t.term = ANY (tsvector_to_array(OLD.tsv)) AND {_MARKED.format(row="t")}));
        DELETE FROM chunk_terms t WHERE t.owner = OLD.owner AND t.collection = OLD.collection
            AND t.term = ANY (array_append(tsvector_to_array(OLD.tsv), ''::text)) AND t.df <= 0;
        INSERT INTO chunk_terms AS t (owner, collection, term, df)
            SELECT NEW.owner, NEW.collection, x, 1 FROM unnest(CASE WHEN {_MARKED.format(row="NEW")}
                THEN array_append(tsvector_to_array(NEW.tsv), ''::text) ELSE ARRAY[''::text] END) x
            ORDER BY x ON CONFLICT (owner, collection, term) DO UPDATE SET df = t.df + 1;
    END IF;
    RETURN NULL;
END $fn$"""

# Every scope that has a row count: marked (0031 counted all of its terms; run after :data:`REBUILD` too).
MARK_ALL = f"""INSERT INTO chunk_terms (owner, collection, term, df)
    SELECT owner, collection, '{MARKER}', 1 FROM chunk_terms WHERE term = ''
    ON CONFLICT (owner, collection, term) DO NOTHING"""


def lazy_step_statements() -> tuple[str, ...]:
    """``0032_pg_chunk_terms_lazy``: the new trigger bodies; every existing scope keeps its counts."""
    return ("SELECT set_config('bara.owners', '*', true)", LAZY_APPLY, _LAZY_UPDATE, MARK_ALL)


def rebuild_statements() -> tuple[str, ...]:
    """Every scope's counts from its rows (a bulk load that paused the insert trigger), every scope marked
    (and so, since 0033, every private vector in the HNSW graph: :mod:`bara.store.pg_flat`)."""
    from bara.store.pg_flat import MOVE_ALL

    return (*REBUILD, MARK_ALL, MOVE_ALL)


# A session's threshold (``PostgresStore`` sets it on every pooled connection).
SET_MIN_ROWS = "SELECT set_config('bara.terms_min_rows', %s, false)"
