"""The encoder's threads spin only inside a call (issue 16): same vectors either way, no CPU burned
once a call has returned, and `bara serve --workers N` (processes sharing the cores) turns it off
unless the settings say otherwise."""

from __future__ import annotations

import time

import numpy as np
from bara.retrieval.embedders import OnnxMiniLMEmbedder, build_embedder
from bara.settings import Settings, load_settings

TEXTS = ["How does TCP detect a lost segment?", "x", "The sender MUST NOT retransmit before the timer expires. " * 8,
         "Les serveurs de noms répondent aux requêtes récursives."]


def test_spinning_does_not_change_a_vector():
    spinning, sleeping = OnnxMiniLMEmbedder(spin=True), OnnxMiniLMEmbedder(spin=False)
    assert np.array_equal(spinning.embed(TEXTS), sleeping.embed(TEXTS))


def test_no_thread_spins_once_a_call_has_returned():
    """ONNX Runtime's own default keeps its workers spinning ~35 ms of CPU per call afterwards."""
    embedder = build_embedder(Settings(), cache=False)
    embedder.embed(["warm up"])
    burned = []
    for _ in range(3):
        embedder.embed(TEXTS[:1])
        start = time.process_time()  # every thread of this process
        time.sleep(0.2)
        burned.append(time.process_time() - start)
    assert min(burned) < 0.01, burned


def test_serve_with_several_workers_turns_spinning_off(serve_calls):
    env = serve_calls("--workers", "2")
    assert load_settings(environ=env).embed_spin_in_call is False


def test_serve_with_one_worker_keeps_spinning(serve_calls):
    env = serve_calls()
    assert load_settings(environ=env).embed_spin_in_call is True


def test_serve_keeps_an_explicit_setting(serve_calls, monkeypatch):
    monkeypatch.setenv("BARA_EMBED_SPIN_IN_CALL", "true")
    env = serve_calls("--workers", "2")
    assert load_settings(environ=env).embed_spin_in_call is True
