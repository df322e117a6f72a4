"""Understand a message before deciding anything: features, intent, conversation state.

Pure functions over frozen values: no I/O, no model calls. Embeddings, when the
caller already has them, refine topic similarity and the intent fallback.
"""

from bara.understand.features import ContextFeatures, compute_features, normalize
from bara.understand.intent import (CHITCHAT_KINDS, INTENTS, IntentResult, apply_rules,
                                    classify_intent)
from bara.understand.prototypes import PrototypeIndex, load_prototypes
from bara.understand.state import ConversationState, update_state

__all__ = [
    "CHITCHAT_KINDS", "INTENTS", "ContextFeatures", "ConversationState", "IntentResult",
    "PrototypeIndex", "apply_rules", "classify_intent", "compute_features", "load_prototypes",
    "normalize", "update_state",
]
