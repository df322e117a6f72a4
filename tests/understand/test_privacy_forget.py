"""Only an explicit request deletes a user's memory on the privacy route (``bara.understand.forget``): a
question about deleting, a negated or a deferred one deletes nothing. Linear in the message's length."""

from __future__ import annotations

import pytest
from test_linear_time_text import RATIO_BOUND, _ratio

from bara.understand.forget import asks_to_forget

REQUESTS = ["please forget my data", "Delete all my data.", "Can you delete my profile?",
            "Could you please erase my history", "I want you to forget everything about me",
            "I\u2019d like you to delete my data", "I want to delete my data", "forget me", "wipe everything",
            "what do you know about me? Forget it all.", "Yes, delete it", "clear my history right now",
            "Forget everything you know about me and start over"]
NOT_REQUESTS = ["how do I delete my data?", "what data do you store about me? don't delete it",
                "do you ever forget what I tell you?", "what do you remember about me and can you clear it later?",
                "never forget my data", "Don\u2019t delete my profile", "will you delete my data if I ask?",
                "what happens when I delete my data?", "privacy policy: what do you delete?",
                "I never asked you to delete anything", "please do not erase my notes",
                "what do you know about me?"]


@pytest.mark.parametrize("message", REQUESTS)
def test_an_explicit_request_asks_to_forget(message):
    assert asks_to_forget(message)


@pytest.mark.parametrize("message", NOT_REQUESTS)
def test_a_question_a_negation_or_a_deferral_does_not(message):
    assert not asks_to_forget(message)


@pytest.mark.parametrize("fill,tail", [("please ", "x delete my data"), ("don't ", "delete"),
                                       ("can you ", "delete"), ("delete ", "later"), ("a", " delete")])
def test_reading_a_long_message_is_linear(fill, tail):
    ratio = _ratio(asks_to_forget, lambda n: fill * (n // len(fill)) + tail)
    assert ratio <= RATIO_BOUND, f"work grew {ratio:.1f}x on a run of {fill!r}"
