"""User ids and isolation: an empty or blank user id is refused everywhere (library, CLI, the helper
the HTTP API will use), another user's conversation id is answered as an unknown one, and on
PostgreSQL no user path can write a row owned by the shared knowledge base, while row-level security
fails closed on every connection state a pooled connection can be in."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from bara.app import Bara
from bara.cli import app
from bara.errors import InputError
from bara.identity import require_user_id, user_id_problem
from bara.memory.conversations import Conversations
from bara.memory.notes import Note, NotesMemory
from bara.memory.profile import ProfileMemory
from bara.memory.qa import QAMemory
from bara.turn.gated import Assistant
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.types import SHARED
from store_contract import doc, vecs

BLANK = ["", " ", "\t", "\n \r", "\u3000", None, 7]


@pytest.mark.parametrize("bad", BLANK)
def test_the_helper_refuses_blank_and_non_text_ids(bad):
    assert user_id_problem(bad)
    with pytest.raises(InputError, match="user id"):
        require_user_id(bad)


def test_the_helper_accepts_ordinary_ids():
    for ok in ("alice", "u_asha", "user-42", "Ünïcode"):
        assert user_id_problem(ok) is None and require_user_id(ok) == ok


@pytest.fixture
def bara(tmp_path, embedder):
    with Bara(Settings(db=str(tmp_path / "id.db"), cache_dir=tmp_path), embedder=embedder) as b:
        yield b


def _calls(bara: Bara, user):
    convs = Conversations(bara.store)
    profile, notes = ProfileMemory(bara.store), NotesMemory(bara.store, bara.embedder, bara.settings)
    qa = QAMemory(bara.store, bara.embedder, bara.settings)
    return {
        "conversations.create": lambda: convs.create(user),
        "conversations.open": lambda: convs.open(user, "c1", create=True),
        "conversations.list": lambda: convs.list(user),
        "conversations.append": lambda: convs.append(user, "c1", "user", "hi"),
        "conversations.record_turn": lambda: convs.record_turn(user, "c1", "q", "a", {}),
        "profile.learn": lambda: profile.learn_from_user_turn(user, "my name is Sam"),
        "profile.get": lambda: profile.get(user),
        "notes.add": lambda: notes.add(user, "c1", [Note("decision", "We decided to use TLS 1.3.")]),
        "qa.add": lambda: qa.add(user, "c1", "What is HSTS?", "A policy."),
        "qa.search": lambda: qa.search(user, "HSTS"),
        "assistant.turn": lambda: Assistant(bara).turn(user, "What is HSTS?"),
    }


@pytest.mark.parametrize("bad", ["", "   ", "\t\n"])
def test_every_library_entry_point_refuses_blank_ids_and_stores_nothing(bara, bad):
    for _name, call in _calls(bara, bad).items():
        with pytest.raises(InputError, match="user id"):
            call()
    tables = ("conversations", "messages", "profile")
    assert [bara.store.query(f"SELECT count(*) FROM {t}")[0][0] for t in tables] == [0, 0, 0]
    assert bara.store.count_chunks(owner=SHARED, collection="notes") == 0
    assert bara.store.count_chunks(owner=SHARED, collection="qa") == 0


@pytest.mark.parametrize("argv", [
    ["chat", "--user", "", "--script", "{script}"],
    ["chat", "--user", "   ", "--script", "{script}"],
    ["memory", "inspect", "--user", " "],
    ["memory", "forget", "--user", ""],
    ["funds", "tool", "get_holdings", "--user", "\t", "--args", "{{}}"],
])
def test_cli_user_option_refuses_blank_ids_with_exit_2(argv, tmp_path):
    script = tmp_path / "s.jsonl"
    script.write_text('{"user": "hello"}\n')
    db = tmp_path / "cli.db"
    SQLiteStore(str(db)).close()
    args = [a.format(script=script) for a in argv] + ["--db", str(db)]
    result = CliRunner().invoke(app, args, env={"BARA_CACHE_DIR": str(tmp_path)})
    assert result.exit_code == 2, result.output
    assert "user id" in result.output and "Traceback" not in result.output


# ------------------------------------------------------------------ another user's conversation id
def test_another_users_conversation_answers_exactly_as_an_unknown_one(bara):
    convs = Conversations(bara.store)
    theirs = convs.create("bob", "bobs-conversation")
    answers = []
    for cid in (theirs, "no-such-conversation"):
        for attempt in (lambda c=cid: convs.open("alice", c), lambda c=cid: convs.open("alice", c, create=True)):
            try:
                attempt()
                answers.append(None)
            except InputError as exc:
                answers.append(str(exc).replace(cid, "<id>"))
    foreign_open, foreign_create, unknown_open, unknown_create = answers
    assert foreign_open == unknown_open and foreign_open is not None  # one message, whatever the id belongs to
    assert "in use" not in foreign_open and "bob" not in foreign_open
    # Ids are per user (key (user_id, id)): creating bob's id makes alice a conversation of her own,
    # exactly as creating an unknown id does; bob's stays his and untouched.
    assert foreign_create is None and unknown_create is None
    assert convs.get("alice", theirs).user_id == "alice"
    assert convs.get("bob", theirs) is not None and convs.history("bob", theirs) == []


def test_a_turn_on_another_users_conversation_is_refused_like_an_unknown_one(bara):
    convs = Conversations(bara.store)
    theirs = convs.create("bob")
    assistant = Assistant(bara)
    with pytest.raises(InputError) as foreign:
        assistant.turn("alice", "What is HSTS?", theirs)
    with pytest.raises(InputError) as unknown:
        assistant.turn("alice", "What is HSTS?", "f" * len(theirs))
    assert str(foreign.value).replace(theirs, "<id>") == str(unknown.value).replace("f" * len(theirs), "<id>")


# --------------------------------------------------------------------------------- PostgreSQL
def _app_conn(urls, schema):
    conn = psycopg.connect(urls.app_url, autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
    return conn


def _seed(store) -> None:
    store.write_document(doc("kb.txt", ["shared knowledge"]), vecs(1))
    store.write_document(doc("a", ["alice note"], owner="alice", collection="notes"), vecs(1))
    conv = Conversations(store)
    conv.append("alice", conv.create("alice", "ca"), "user", "hello from alice")


_INSERTS = {
    "documents": ("INSERT INTO documents (owner, collection, source, content_hash, updated_at)"
                  " VALUES (?, 'kb', 'planted', 'h', 0)"),
    "conversations": "INSERT INTO conversations (id, user_id, created_at, updated_at) VALUES ('planted', ?, 0, 0)",
    "profile": "INSERT INTO profile (user_id, key, value, updated_at) VALUES (?, 'name', 'x', 0)",
}


@pytest.mark.parametrize("table", list(_INSERTS))
def test_no_user_path_can_write_a_shared_row(pg_store_factory, table):
    store = pg_store_factory()
    _seed(store)
    with store.scoped((SHARED, "alice")):  # exactly the scope of alice's turn
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            store.execute(_INSERTS[table], (SHARED,))
        store.execute(_INSERTS[table].replace("'planted'", "'planted2'"), ("alice",))  # her own rows: fine
        assert store.execute("UPDATE documents SET title = 'defaced' WHERE owner = ''") == 0
        assert store.execute("DELETE FROM chunks WHERE owner = ''") == 0
        assert store.execute("DELETE FROM documents WHERE owner = ''") == 0
    with store.scoped((SHARED, "alice")):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            store.execute("UPDATE documents SET owner = '' WHERE owner = 'alice'")  # moving a row into shared
    assert store.count_chunks(owner=SHARED) == 1  # the knowledge base is intact
    assert store.query("SELECT title FROM documents WHERE owner = ''")[0][0] != "defaced"


def test_the_shared_knowledge_base_stays_readable_and_maintainable(pg_store_factory):
    store = pg_store_factory()
    _seed(store)
    with store.scoped((SHARED, "alice")):
        assert {r[0] for r in store.query("SELECT owner FROM documents")} == {"", "alice"}
    store.write_document(doc("kb2.txt", ["more shared knowledge"]), vecs(1))  # maintenance ('*') writes shared
    assert store.delete_document("kb2.txt")


STATES = {
    "fresh_connection_null": [],
    "empty_setting": ["SET bara.owners = ''"],
    "after_a_scoped_transaction": ["BEGIN", "SELECT set_config('bara.owners', '[\"alice\"]', true)",
                                   "SELECT count(*) FROM documents", "COMMIT"],
    "reset": ["SET bara.owners = '[\"alice\"]'", "RESET bara.owners"],
    "empty_json_list": ["SET bara.owners = '[]'"],
}


@pytest.mark.parametrize("state", list(STATES))
def test_row_level_security_fails_closed_on_every_connection_state(state, pg_store_factory, pg_server_urls,
                                                                   pg_schema):
    store = pg_store_factory()
    _seed(store)
    with _app_conn(pg_server_urls, pg_schema) as conn:
        for statement in STATES[state]:
            conn.execute(statement)
        setting = conn.execute("SELECT current_setting('bara.owners', true)").fetchone()[0]
        assert setting in (None, "", "[]")  # the state under test really is unscoped
        for table in ("documents", "chunks", "conversations", "messages", "profile"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, (state, table)  # noqa: S608
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO documents (owner, collection, source, content_hash, updated_at)"
                         " VALUES ('alice', 'notes', 'x', 'h', 0)")
    with _app_conn(pg_server_urls, pg_schema) as conn:  # negative control: a real scope does see rows
        conn.execute("SET bara.owners = '[\"alice\"]'")
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 1


def test_pooled_store_connection_after_a_scoped_turn_sees_nothing_unscoped(pg_store_factory):
    """The store's own pooled connection, reused after a scoped transaction: a raw query on it sees no row."""
    store = pg_store_factory()
    _seed(store)
    with store.scoped(["alice"]):
        assert store.query("SELECT count(*) FROM messages")[0][0] == 1
    with store._pool.connection() as conn:  # what the next borrower gets, before it sets any scope
        assert conn.execute("SELECT current_setting('bara.owners', true)").fetchone()[0] in (None, "")
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
