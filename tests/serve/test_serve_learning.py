"""What a turn learned over HTTP can be stored after its response (`serve_learn_after_response`, one
worker): the answer does not wait for the notes, Q&A pair and episodic record, and they are stored
without another request. By default, and always with several workers, they are stored first."""

from __future__ import annotations

import threading
import time

import httpx
from serve_helpers import bearer, live_server, make_app, sqlite_runtime

from bara.settings import load_settings

DECISION = "We decided to use the blue plan for TLS."  # a note: encoded and stored by the write-behind
MESSAGE = f"{DECISION} What does HSTS do?"  # the turn encodes the whole message, the note only its sentence


class GatedEmbedder:
    """The session's encoder, except that encoding the note alone waits until ``release`` is set: the
    write-behind cannot store it before the test lets it."""

    def __init__(self, inner):
        self.inner, self.release = inner, threading.Event()
        self.model_id, self.cache_key, self.dim = inner.model_id, inner.cache_key, inner.dim

    def embed(self, texts):
        if list(texts) == [DECISION] and not self.release.wait(30):
            raise TimeoutError("the test never released the note's encoding")
        return self.inner.embed(texts)


def _notes(runtime, user: str) -> list[str]:
    return [n.text for n in runtime.bara.notes.list(user)]


def test_the_response_does_not_wait_for_what_the_turn_learned(tmp_path, embedder):
    gated = GatedEmbedder(embedder)
    runtime = sqlite_runtime(tmp_path / "later.db", gated, serve_learn_after_response=True)
    key = runtime.keys.create("alice").key
    try:
        with live_server(make_app(runtime)) as url:
            # Answered while the note's encoding is held (a response that waited for it would time out
            # here; the store itself is busy with that write until the release, so it is not read now).
            reply = httpx.post(f"{url}/api/turns", json={"message": MESSAGE}, headers=bearer(key), timeout=10)
            assert reply.status_code == 200
            assert reply.json()["trace"]["stored"]["notes"] == [DECISION]  # the turn did learn the note
            gated.release.set()
            deadline = time.monotonic() + 20
            while not _notes(runtime, "alice") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _notes(runtime, "alice") == [DECISION]  # stored after the response, with no other request
    finally:
        gated.release.set()
        runtime.close()


def test_by_default_a_turn_stores_what_it_learned_before_answering(tmp_path, embedder):
    runtime = sqlite_runtime(tmp_path / "first.db", embedder)
    key = runtime.keys.create("alice").key
    try:
        with live_server(make_app(runtime)) as url:
            reply = httpx.post(f"{url}/v1/chat/completions", headers=bearer(key), timeout=20,
                               json={"model": "bara-gated", "messages": [{"role": "user", "content": MESSAGE}]})
            assert reply.status_code == 200
            assert _notes(runtime, "alice") == [DECISION]  # already stored when the answer arrived
    finally:
        runtime.close()


def test_serve_with_several_workers_stores_learning_before_responding(serve_calls, monkeypatch):
    monkeypatch.setenv("BARA_SERVE_LEARN_AFTER_RESPONSE", "true")
    assert load_settings(environ=serve_calls()).serve_learn_after_response is True  # one worker: as set
    monkeypatch.delenv("BARA_SERVE_LEARN_AFTER_RESPONSE")
    assert load_settings(environ=serve_calls()).serve_learn_after_response is False  # the default
    assert load_settings(environ=serve_calls("--workers", "2")).serve_learn_after_response is False
