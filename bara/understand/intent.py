"""Intent classification: named rules first, nearest prototype only when rules are silent.

Rules are cheap, readable and fixable one at a time; the embedding fallback
exists for phrasings no rule anticipated. Each result records which rule (or
the prototype) decided, so a wrong route can be traced to its cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from bara.settings import Settings
from bara.types import CHITCHAT_KINDS, INTENTS, ChitchatKind, Intent
from bara.understand.features import ContextFeatures
from bara.understand.prototypes import PrototypeIndex

CHITCHAT_PREFIX = "chitchat:"

_END = r"[\s.!?,;:)(\-]*$"
_NAME_TAIL = r"(\s+(there|all|everyone|folks|bara|bot|buddy|friend|again))?"
_GREETING_ONLY = re.compile(
    r"^\W*(hi|hello|hey|heya|hiya|howdy|yo|greetings|good (morning|afternoon|evening|day)|"
    r"what'?s up|sup)" + _NAME_TAIL + r"[\s,.!]*(how are you( doing)?|how'?s it going)?" + _END)
_THANKS = re.compile(
    r"^\W*(ok(ay)?,?\s+|great,?\s+|perfect,?\s+)?(thanks|thank you|thx|ty|cheers|much appreciated|"
    r"appreciate it|many thanks)(\s+(so much|a lot|very much|again|bara|for (that|this|the help|"
    r"your help|everything)))*" + _END)
_GOODBYE = re.compile(
    r"^\W*(ok(ay)?,?\s+)?(bye|bye bye|goodbye|good bye|see (you|ya)( later| soon| tomorrow)?|later|"
    r"good night|take care|cya|farewell|that'?s all( for (now|today))?|i'?m done( for (now|today))?)"
    + _NAME_TAIL + _END)
_ACK_WORD = (r"(ok|okay|k|kk|got it|i see|sure|yes|yeah|yep|yup|no|nope|nah|alright|all right|cool|"
             r"fine|makes sense|understood|right|great|perfect|nice|awesome|maybe|cancel|"
             r"never mind|nevermind|nvm|hmm+|ah|oh|noted|good|sounds good)")
_ACK = re.compile(r"^\W*" + _ACK_WORD + r"([\s,.!]+" + _ACK_WORD + r")*" + _END)
_TESTING = re.compile(
    r"^\W*(test(ing)?( \d+| test(ing)?)*|is (this|anyone|anybody) (thing )?(on|there|working)|"
    r"are you (there|working|alive|awake|online)|ping|asdf\w*|qwerty\w*|\d+( \d+)*|"
    r"can you hear me|hello\?+|check( check)*|lorem ipsum\b.*|just testing\b.*|this is a test\b.*)"
    + _END)
_META = re.compile(
    r"\b(who are you|what are you|what can (you do|i ask( you)?)|how do you work|"
    r"are you (an? )?(bot|ai|robot|human|real|person|chatgpt|llm|machine)|"
    r"who (made|built|created|programmed|trained) you|what('?s| is) your name|how old are you|"
    r"where are you from|tell me (a joke|about yourself|something funny)|what model are you|"
    r"do you have (feelings|pets|hobbies|a name)|what are your (hobbies|capabilities|limits)|"
    r"why did you (say|answer|respond)|you (keep|always) (saying|repeating)|"
    r"(meaning|purpose) of (life|existence)|life'?s (meaning|purpose)|fun fact|"
    r"(cool|interesting|random|fun) (fact|thing)|tell me something (interesting|fun|cool|new)|"
    r"can i ask (you|the (ai|assistant|bot))|questions (can|do) you answer)\b")
_KNOWLEDGE = re.compile(
    r"^\W*(what|how|why|when|where|which|who|whose|explain|describe|define|compare|list|"
    r"summari[sz]e|tell me about|is there|are there|does|do|is|are|can|could|should|"
    r"what'?s|how'?s|difference between)\b")
#: A request to learn about a named topic ("I'd love to learn something interesting about the wonders of the
#: world"): an information request whatever greeting opens it; not about the assistant or the
#: user ("what do you know about me"). "Fun facts about X" stays small talk (CLINC150's fun_fact intent).
_LEARN_ABOUT = re.compile(r"\b(learn|know|hear|read)\b[^.?!]{0,40}?\babout (?!(you|yourself|me|myself|"
                          r"us|it|that|this|them)\b)(the |a |an |some )?[a-z]{3,}")
#: A message that opens by telling the assistant to do something (not "call me <name>", "tell me ..."): what
#: follows is the command's object, so a profile phrase inside it ("say i love you") states nothing.
_COMMAND = re.compile(
    r"^\W*(add|text|message|email|call|dial|play|send|book|cancel|order|buy|say|ask|open|make|put|flip|roll|"
    r"pick|read|set|turn|connect)\b(?!\s+me\b)")
#: Calling someone else ("remind me to call bob", "connect me to jordan") reads like "call me Bob" to the
#: prototypes, whose profile examples are names the user gives: a profile guess with this in it is dropped.
_CALLS_SOMEONE = re.compile(r"\b(call|phone|ring|dial)\s+(?!(me|myself|you|yourself|it|that|this)\b)\w|"
                            r"\bconnect me (to|with)\b")
#: Verbs that open a request for an action in the world. On CLINC150 train 454 messages open with one of them
#: and none is small talk or about the assistant itself (unlike "change", "set", "turn", "speak", "stop").
_ACTION = re.compile(r"^\W*(add|order|purchase|buy|check|schedule|delete|text|send|dial|book|play|call(?!\s+me\b)|"
                     r"show(?!\s+me\b)|give(?!\s+me\b)|pay|transfer)\b")
_TECHNICAL = re.compile(r"\b(rfc ?\d+|according to|documentation|the docs|spec(ification)?|"
                        r"standard|protocol|definition of)\b")
_ADDRESSES_ASSISTANT = re.compile(r"\b(you|your|yourself)\b")
_POLITE_PREFIX = re.compile(
    r"^\W*(please\s+)?((can|could|would|will) you( please)?|do you know|i (want|would like|need) "
    r"to know|tell me)\s+")


def rule_confidences(s: Settings) -> dict[str, float]:
    """How sure each rule (and ``default``) is when it decides, from the ``intent_confidence_*`` settings."""
    return {
        "empty": s.intent_confidence_empty, "privacy": s.intent_confidence_privacy,
        "profile_statement": s.intent_confidence_profile_statement,
        "profile_question": s.intent_confidence_profile_question, "testing": s.intent_confidence_testing,
        "greeting": s.intent_confidence_greeting, "thanks": s.intent_confidence_thanks,
        "goodbye": s.intent_confidence_goodbye, "acknowledgement": s.intent_confidence_acknowledgement,
        "meta": s.intent_confidence_meta, "followup": s.intent_confidence_followup,
        "elaboration": s.intent_confidence_elaboration, "short_question": s.intent_confidence_short_question,
        "knowledge_question": s.intent_confidence_knowledge_question, "learn_about": s.intent_confidence_knowledge_question,
        "technical_reference": s.intent_confidence_technical_reference, "default": s.intent_confidence_default,
    }


@dataclass(frozen=True)
class IntentResult:
    """The classified intent, who decided it (``rule:<name>`` or ``prototype``) and how surely."""

    intent: Intent
    source: str
    confidence: float
    chitchat: ChitchatKind | None = None  # kind when intent == "chitchat"


Rule = Callable[[ContextFeatures], "tuple[Intent, ChitchatKind | None] | None"]


def _rule_empty(f: ContextFeatures):
    return ("chitchat", "testing") if f.word_count == 0 else None


def _rule_privacy(f: ContextFeatures):
    return ("privacy", None) if f.privacy_signal else None


def _rule_profile_statement(f: ContextFeatures):
    """"I'm a nurse", "call me Sam": a statement about the user, unless the message asks something or
    opens with a command whose object merely quotes one ("text chris and say i love you", "add i like it
    by cardi b to my playlist", "tell me how far i am from home")."""
    stated = f.stated_name is not None or f.is_profile_statement
    if not stated:
        return None
    asks = f.has_question_mark or f.is_question or bool(_KNOWLEDGE.match(f.normalized) or
                                                         _COMMAND.match(f.normalized))
    return None if asks else ("profile", None)


def _rule_profile_question(f: ContextFeatures):
    return ("profile", None) if f.is_profile_question else None


def _pattern_rule(pattern: re.Pattern[str], kind: ChitchatKind) -> Rule:
    """A rule that fires when the whole normalised message is chit-chat of ``kind``."""
    def rule(f: ContextFeatures):
        return ("chitchat", kind) if pattern.search(f.normalized) else None
    return rule


def _rule_meta(f: ContextFeatures):
    if _LEARN_ABOUT.search(f.normalized):  # "learn something interesting about X" names a topic
        return None
    return ("chitchat", "meta") if f.word_count <= 12 and _META.search(f.normalized) else None


def _rule_learn_about(f: ContextFeatures):
    return ("knowledge_base", None) if _LEARN_ABOUT.search(f.normalized) else None


def _rule_followup(f: ContextFeatures):
    return ("continuation", None) if f.is_followup else None


def _rule_elaboration(f: ContextFeatures):
    return ("continuation", None) if "elaboration" in f.followup_signals else None


def _rule_short_question(f: ContextFeatures):
    return ("continuation", None) if "short_question" in f.followup_signals else None


def _rule_knowledge_question(f: ContextFeatures):
    q = _POLITE_PREFIX.sub("", f.normalized)
    asks = bool(_KNOWLEDGE.match(q)) or f.has_question_mark or q != f.normalized
    about_topic = not _ADDRESSES_ASSISTANT.search(q) or bool(_TECHNICAL.search(q))
    return ("knowledge_base", None) if asks and f.word_count >= 3 and about_topic else None


def _rule_technical_reference(f: ContextFeatures):
    return ("knowledge_base", None) if _TECHNICAL.search(f.normalized) else None


#: Evaluated in order; the first rule that fires decides.
RULES: tuple[tuple[str, Rule], ...] = (
    ("empty", _rule_empty),
    ("privacy", _rule_privacy),
    ("profile_statement", _rule_profile_statement),
    ("profile_question", _rule_profile_question),
    ("testing", _pattern_rule(_TESTING, "testing")),
    ("greeting", _pattern_rule(_GREETING_ONLY, "greeting")),
    ("thanks", _pattern_rule(_THANKS, "thanks")),
    ("goodbye", _pattern_rule(_GOODBYE, "goodbye")),
    ("acknowledgement", _pattern_rule(_ACK, "acknowledgement")),
    ("meta", _rule_meta),
    ("learn_about", _rule_learn_about),
    ("followup", _rule_followup),
    ("elaboration", _rule_elaboration),
    ("short_question", _rule_short_question),
    ("knowledge_question", _rule_knowledge_question),
    ("technical_reference", _rule_technical_reference),
)


def apply_rules(features: ContextFeatures, settings: Settings | None = None) -> IntentResult | None:
    """First conclusive rule, or None when no rule recognises the message."""
    confidence = rule_confidences(settings or Settings())
    for name, rule in RULES:
        hit = rule(features)
        if hit is not None:
            return IntentResult(hit[0], f"rule:{name}", confidence[name], hit[1])
    return None


def label_to_intent(label: str) -> tuple[Intent, ChitchatKind | None]:
    """Map a prototype label (``chitchat:<kind>`` or an intent name) to (intent, kind)."""
    if label.startswith(CHITCHAT_PREFIX):
        kind = label[len(CHITCHAT_PREFIX):]
        return "chitchat", kind if kind in CHITCHAT_KINDS else "meta"
    return (label, None) if label in INTENTS else ("general", None)


def _from_prototype(prototypes: PrototypeIndex | None, vector: np.ndarray | None,
                    min_similarity: float) -> IntentResult | None:
    found = prototypes.nearest_accepted(vector) if prototypes is not None else None
    if found is None:
        return None
    label, similarity = found
    if similarity < min_similarity:
        return None
    intent, kind = label_to_intent(label)
    return IntentResult(intent, "prototype", round(max(similarity, 0.0), 4), kind)


#: Rules that recognise a question by its form alone: "does life have meaning?" and "can you answer
#: in Italian?" look like knowledge questions but are small talk, which the prototypes know better.
_FORM_ONLY_RULES = frozenset({"rule:knowledge_question", "rule:short_question"})


def _small_talk_override(ruled: IntentResult, features: ContextFeatures, prototypes: PrototypeIndex | None,
                         vector: np.ndarray | None, cfg: Settings) -> IntentResult | None:
    """A form-only question whose embedding sits very close to a chit-chat prototype is chit-chat,
    unless it names a technical reference (an RFC, a protocol, the docs) or leans on earlier turns
    ("how old is it?" in a conversation asks about the topic, not about the assistant)."""
    if ruled.source not in _FORM_ONLY_RULES or features.followup_signals or _TECHNICAL.search(features.normalized):
        return None
    guessed = _from_prototype(prototypes, vector, cfg.gate_small_talk_override_similarity)
    if guessed is None or guessed.intent != "chitchat":
        return None
    return IntentResult("chitchat", "prototype_override", guessed.confidence, guessed.chitchat)


def classify_intent(message: str, features: ContextFeatures,
                    prototypes: PrototypeIndex | None = None,
                    message_vector: np.ndarray | None = None,
                    *, settings: Settings | None = None) -> IntentResult:
    """Rules, then the nearest prototype (if a vector is given), then ``rule:default``.

    ``message`` is accepted for callers' clarity; the rules read ``features.normalized``,
    which compute_features derived from it.
    """
    cfg = settings or Settings()
    return classify_ruled(apply_rules(features, cfg), features, prototypes, message_vector, cfg)


def _guess_ruled_out(guessed: IntentResult, normalized: str) -> bool:
    """A prototype's guess the message's form contradicts: profile for a message that calls someone else,
    chit-chat for one that opens by asking the assistant to act ("add a vet appointment", "order dog food")."""
    if guessed.intent == "profile":
        return bool(_CALLS_SOMEONE.search(normalized))
    return guessed.intent == "chitchat" and bool(_ACTION.match(normalized))


def classify_ruled(ruled: IntentResult | None, features: ContextFeatures, prototypes: PrototypeIndex | None,
                   message_vector: np.ndarray | None, cfg: Settings) -> IntentResult:
    """The intent once the rules have been read (``ruled``: what :func:`apply_rules` found for these
    features, None when no rule fired): a form-only rule may yield to a very close small-talk
    prototype; silent rules fall to the nearest accepted prototype, then ``rule:default``. The gate
    reads the rules before the message is embedded and concludes with this once the vector exists."""
    if ruled is not None:
        return _small_talk_override(ruled, features, prototypes, message_vector, cfg) or ruled
    floor = cfg.gate_prototype_min_similarity
    guessed = _from_prototype(prototypes, message_vector, floor)
    if guessed is not None and not _guess_ruled_out(guessed, features.normalized):
        return guessed
    return IntentResult("general", "rule:default", cfg.intent_confidence_default, None)
