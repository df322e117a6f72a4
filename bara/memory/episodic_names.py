"""The per-user name index of the episodic tier: table ``episodic_names`` (migration ``0015_episodic_names``).

Every gated turn of a returning user asks which names its memory knows (speakers, and names said
mid-sentence) so that "When did Caroline ..." opens the episodic tier. ``episodic_sessions`` holds one
row per stored batch (a chat turn is one), so reading the names there is linear in the user's history.
This table holds one row per (user, conversation, name) with the number of that conversation's
sessions naming it, and a lookup key ``prefix``: the name's first two characters lower-cased by the
database. A message's capitalised words start with an ASCII capital and an ASCII lower-case letter
(:func:`bara.decide.policy.capitalised_words`), and a name matches one of them only if it equals it
or starts with it, case-insensitively, so every name that can match a word shares the word's key:
a turn reads only the names under its words' keys, one indexed range each.

The key is computed by the database's ``lower()`` on insert, in the backfill and on lookup alike (the
same expression ``lower(substr(x, 1, 2))`` everywhere), so the three agree on each backend whatever
its case rules; the few candidates are re-checked in Python, and the gate applies its own rule
(:func:`bara.decide.policy.episodic_signals`) to them. One gap, in theory only: Python's ``lower()``
folds a handful of non-ASCII letters to ASCII ones (the Kelvin sign to ``k``), which a database's
``lower()`` may not, so a name starting with one would no longer be found by a word spelt in ASCII.

The step's SQL is pinned (tests/store/test_store_registry.py): ``_KEY`` is shared with the runtime statements,
and changing it would edit a released step.

Upkeep runs in the transaction that writes ``episodic_sessions``: a stored session adds its names, a
replaced one swaps its old names for its new ones (a name leaves the conversation's row only when no
other session of that conversation names it), and forgetting a user deletes the user's rows.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from bara.store.base import SqlRunner

STEP = "0015_episodic_names"

_TABLE = """CREATE TABLE episodic_names (
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    sessions INTEGER NOT NULL,
    PRIMARY KEY (user_id, name, conversation_id))"""

_KEY = "lower(substr({}, 1, 2))"  # the lookup key; the same expression on insert, backfill and lookup

#: Part 0 of the step (portable SQL): the table and its lookup index, covering (a lookup reads no row).
TABLE = [_TABLE, "CREATE INDEX episodic_names_prefix ON episodic_names (user_id, prefix, name, conversation_id)"]

# One row per (session, name) from both JSON lists (UNION: a name a session lists twice counts once),
# then counted per conversation. ``NULLIF``: an empty text is an empty list, as ``json.loads(x or "[]")``.
_BACKFILL = """INSERT INTO episodic_names (user_id, conversation_id, name, prefix, sessions)
SELECT user_id, conversation_id, name, {key}, COUNT(*) FROM (
    SELECT s.user_id, s.conversation_id, s.session, {speaker} AS name FROM episodic_sessions s{speakers}
    UNION
    SELECT s.user_id, s.conversation_id, s.session, {mention} AS name FROM episodic_sessions s{mentions}
) named GROUP BY user_id, conversation_id, name"""


def _backfill(each: str, value: str) -> str:
    return _BACKFILL.format(key=_KEY.format("name"), speaker=value.format("sp"), mention=value.format("mn"),
                            speakers=each.format(col="speakers", alias="sp"),
                            mentions=each.format(col="mentions", alias="mn"))


#: Part 10 on SQLite: the backfill through ``json_each``.
SQLITE_BACKFILL = [_backfill(", json_each(COALESCE(NULLIF(s.{col}, ''), '[]')) {alias}", "{}.value")]

#: Part 10 on PostgreSQL: the backfill through ``json_array_elements_text``. The step runs as the
#: schema's owner, whom row-level security binds too (FORCE): the trusted scope ``*`` lets it read every
#: user's sessions, for this transaction only.
PG_BACKFILL = [
    "SELECT set_config('bara.owners', '*', true)",
    _backfill(" CROSS JOIN LATERAL json_array_elements_text(COALESCE(NULLIF(s.{col}, ''), '[]')::json) {alias}(name)",
              "{}.name"),
]

_ADD = (f"INSERT INTO episodic_names (user_id, conversation_id, name, prefix, sessions) VALUES (?, ?, ?, "
        f"{_KEY.format('?')}, 1) ON CONFLICT (user_id, name, conversation_id)"
        " DO UPDATE SET sessions = episodic_names.sessions + 1")
_DROP = "UPDATE episodic_names SET sessions = sessions - 1 WHERE user_id=? AND conversation_id=? AND name=?"
_PURGE = "DELETE FROM episodic_names WHERE user_id=? AND conversation_id=? AND sessions <= 0"


def session_names(speakers: Iterable[str], mentions: Iterable[str]) -> set[str]:
    """The names one session contributes: its speakers and the names said in it."""
    return {*speakers, *mentions}


def replace_session(runner: SqlRunner, user_id: str, conversation_id: str, old: set[str], new: set[str]) -> None:
    """A session of ``conversation_id`` named ``old`` (empty when it is new) and now names ``new``."""
    added, gone = sorted(new - old), sorted(old - new)
    for name in added:  # a turn's own session adds its speaker's name: no round trip of its own (SqlRunner.write)
        runner.write(_ADD, (user_id, conversation_id, name, name))
    if gone:
        runner.executemany(_DROP, [(user_id, conversation_id, name) for name in gone])
        runner.execute(_PURGE, (user_id, conversation_id))


def forget(runner: SqlRunner, user_id: str) -> int:
    return runner.execute("DELETE FROM episodic_names WHERE user_id=?", (user_id,))


def every_name(runner: SqlRunner, user_id: str, exclude_conversation: str) -> frozenset[str]:
    """Every name of the user's sessions outside ``exclude_conversation``."""
    rows = runner.query("SELECT DISTINCT name FROM episodic_names WHERE user_id=? AND conversation_id<>?",
                        (user_id, exclude_conversation))
    return frozenset(name for (name,) in rows)


def candidates(runner: SqlRunner, user_id: str, exclude_conversation: str, words: Sequence[str]) -> frozenset[str]:
    """The user's names outside ``exclude_conversation`` that equal or start with one of ``words``
    (case-insensitively): every name the gate's rule could match, and few others. One indexed query.

    ``DISTINCT prefix, name``, the index's own order, not ``DISTINCT name``: for that SQLite would walk
    the primary key (ordered by name) over all the user's rows rather than the prefix index. The index
    still holds one entry per conversation naming a name of those keys; the database folds them."""
    heads = sorted({w[:2] for w in words if w})
    if not heads:
        return frozenset()
    keys = ", ".join([_KEY.format("?")] * len(heads))
    rows = runner.query(f"SELECT DISTINCT prefix, name FROM episodic_names WHERE user_id=? AND prefix IN ({keys})"
                        " AND conversation_id<>?", (user_id, *heads, exclude_conversation))
    folded = {w.lower() for w in words if w}
    return frozenset(name for _, name in rows if any(name.lower().startswith(w) for w in folded))
