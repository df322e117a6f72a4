"""PostgreSQL: a small private scope's vectors stay out of the HNSW graph (``0033_pg_flat_vectors``).

Every turn stores a user's rows (its Q&A pair, its episodic record) in that user's own small scopes,
and every such insert used to walk the one HNSW graph of the whole table (the knowledge base's too) to
link the new vector in: ~1-1.5 ms of the server's CPU a turn (docs/benchmarks.md, issue 33), for rows
that the dense arm ranks by exact distance anyway while the user holds fewer than
``pg_private_exact_max`` of them (:mod:`bara.store.pg_sql`).

So a private row of a scope (owner, collection) that is not *marked* keeps its vector in ``flat``
and ``embedding`` NULL: pgvector's HNSW index does not hold NULL vectors. Marked is the lazy term
counts' mark (:mod:`bara.store.pg_lexical`, ``term = ' '``: the scope reached
``pg_lexical_terms_min_rows`` rows, or it existed when 0032 ran): a large scope's rows are in the graph.

- **Writes.** A row trigger (``BEFORE INSERT OR UPDATE OF embedding``, only for ``owner <> ''``: a
  knowledge-base load never calls it) moves the vector to ``flat`` when the row's scope is unmarked.
  The write that marks a scope (the lazy insert trigger's crossing loop, re-created here) moves that
  scope's flat vectors into ``embedding`` (and so into the graph) in the same statement; a bulk load's
  rebuild does the same for every scope it marks (``pg_lexical.rebuild_statements``). A row that a
  concurrent writer inserted into the scope before it was marked stays flat (the search below still
  ranks it; it only costs that exact pass a row).
- **Reads.** The dense arm's exact passes rank ``coalesce(embedding, flat)``; above
  ``pg_private_exact_max`` the HNSW pass finds the graph's rows and one more exact pass ranks the
  scope's flat rows through the partial index ``chunks_flat`` (only flat rows are in it), so a user
  whose small collections sit beside a large one loses none of them. A store whose rows were all
  written before this step has no flat rows, and every row is where it was.
"""

from __future__ import annotations

from bara.store import pg_lexical

_FLAT_FUNCTION = f"""CREATE OR REPLACE FUNCTION bara_chunks_flat() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM chunk_terms m WHERE m.owner = NEW.owner AND m.collection = NEW.collection
                   AND m.term = '{pg_lexical.MARKER}') THEN
        NEW.flat := NEW.embedding;
        NEW.embedding := NULL;
    END IF;
    RETURN NEW;
END $fn$"""

FLAT_TRIGGER = "chunks_flat"  # a bulk load that builds the graph afterwards may disable it (bench/scale_build.py)
_FLAT_TRIGGER = f"""CREATE TRIGGER {FLAT_TRIGGER} BEFORE INSERT OR UPDATE OF embedding ON chunks FOR EACH ROW
    WHEN (NEW.owner <> '' AND NEW.embedding IS NOT NULL) EXECUTE FUNCTION bara_chunks_flat()"""

# The scope the lazy trigger has just marked: its flat vectors join the graph.
_MOVE_SCOPE = """UPDATE chunks c SET embedding = c.flat, flat = NULL
                WHERE c.owner = s.owner AND c.collection = s.collection AND c.embedding IS NULL;"""


def lazy_apply_moving() -> str:
    """0032's insert/delete trigger body with one more statement after a scope is marked: its flat
    vectors move into ``embedding`` (0032's own text stays as it was applied)."""
    mark = pg_lexical.MARK_SCOPE
    return pg_lexical.LAZY_APPLY.replace(mark, mark + "\n            " + _MOVE_SCOPE, 1)


def step_statements() -> tuple[str, ...]:
    """``0033_pg_flat_vectors``: the nullable graph column, ``flat``, its partial index, the triggers.
    Catalogue changes only: no existing row is rewritten or re-indexed."""
    return ("SELECT set_config('bara.owners', '*', true)",
            "ALTER TABLE chunks ALTER COLUMN embedding DROP NOT NULL",
            "ALTER TABLE chunks ADD COLUMN flat vector",
            "ALTER TABLE chunks ADD CONSTRAINT chunks_one_vector CHECK ((embedding IS NULL) <> (flat IS NULL)) NOT VALID",
            "CREATE INDEX chunks_flat ON chunks (owner, collection) WHERE embedding IS NULL",
            _FLAT_FUNCTION, _FLAT_TRIGGER, lazy_apply_moving())


# After a rebuild marked every scope (a bulk load): every flat vector joins the graph.
MOVE_ALL = "UPDATE chunks SET embedding = flat, flat = NULL WHERE embedding IS NULL"
