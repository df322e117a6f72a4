"""Follow-up rewriting at its edges (written against surviving mutants): the length cap's word
boundary, a compared pair, refusals and chit-chat turns ignored."""

from __future__ import annotations

from bara.types import Utterance as U
from bara.understand.rewrite import _cap, entities, rewrite_query

PAIR = [U("user", "Compare Kubernetes and OpenShift for me"),
        U("assistant", "Kubernetes is open source; OpenShift is a Red Hat product.")]


def test_cap_keeps_text_at_the_limit_and_cuts_at_the_last_word_boundary_past_half():
    assert _cap("abcdefghij", 10) == "abcdefghij"  # exactly at the limit: untouched
    assert _cap("abcdef g hij klm", 12) == "abcdef g"  # the LAST space in the window
    assert _cap("abcdef  ghijk", 10) == "abcdef"  # trailing blanks trimmed, leading kept
    assert _cap("abcde fghijklmn", 10) == "abcde fghi"  # a space at exactly half: hard cut
    assert _cap("abcd efghijklm", 10) == "abcd efghi"  # a space before half: hard cut
    assert _cap("  abcdefgh ijk", 12) == "  abcdefgh"


def test_a_plural_reference_carries_both_names_of_the_pair():
    # issue 31: words are chosen by the term scorer; a compared pair's names are both the topic
    two = rewrite_query("How do they differ in pricing?", PAIR)
    assert {"Kubernetes", "OpenShift"} <= set(two.carried) and two.reasons[0] == "scored_terms"


def test_a_name_the_message_says_is_not_carried_again():
    assert "Kubernetes" not in rewrite_query("Tell me about Kubernetes, what about the other one?", PAIR).carried
    assert "OpenShift" not in rewrite_query("Tell me about OpenShift, what about the other one?", PAIR).carried


def test_refusals_and_chitchat_turns_give_nothing():
    history = [U("user", "What is HSTS?"), U("assistant", "Sorry, I do not have anything on Quantum Widgets."),
               U("user", "thanks")]
    result = rewrite_query("is it secure?", history)
    assert "Quantum" not in result.query and "thanks" not in result.query
    assert result.query.startswith("is it secure?") and result.carried == ("HSTS",)


def test_agent_turns_give_names_not_loose_words():
    history = [U("user", "Tell me about certificates"), U("assistant", "Browsers validate chains using OCSP stapling.")]
    result = rewrite_query("how does that work?", history)
    assert "Browsers validate" not in result.query and "chains" not in result.query


def test_entities_shapes():
    assert entities("IPv6 is great") == ["IPv6"]
    assert entities("Regional differences") == []  # a lone sentence-initial capital is grammar
    assert entities("we use NAT here") == ["NAT"]
    assert entities("A router") == [] and entities("we like Go") == ["Go"]
    assert entities("Compare Kubernetes and OpenShift") == ["Kubernetes", "OpenShift"]


def test_unchanged_and_truncated_reasons():
    assert rewrite_query("What is HSTS?", []).reasons == ("no_history",)
    long = rewrite_query("word " * 50, [], max_chars=20)
    assert long.changed and long.reasons == ("no_history", "truncated") and len(long.query) <= 20
