"""One turn of a conversation.

``skeleton`` is the preamble every assistant runs (sanitise, the empty turn, open, lock, scope, load),
re-exported here so ``from bara.turn import TurnStart, empty_trace, run_turn`` names it. ``gated`` is
the gated assistant built on it and ``always`` the always baseline, both on ``base`` (what they share),
with the ``steps``, the ``records`` between stages and the ``persist`` stage; those sit in a higher layer
(above ``bara.agent``) than the skeleton, so this module imports only the skeleton.
"""

from bara.turn.skeleton import Loaded, ScopedStore, TurnStart, empty_trace, load_conversation, run_turn

__all__ = ["Loaded", "ScopedStore", "TurnStart", "empty_trace", "load_conversation", "run_turn"]
