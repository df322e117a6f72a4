"""Cheap, deterministic context features of one user message.

Everything here is regular expressions and arithmetic so the gate can decide
*whether* to retrieve before paying for any retrieval. Embedding-based features
(topic similarity) are computed only when the caller already has the vectors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from bara.settings import Settings
from bara.text.vecmath import as_f32, norm
from bara.types import Utterance
from bara.understand.note_cues import records_note

# --- follow-up structure ---------------------------------------------------
_PRONOUN_DEPS = re.compile(
    r"\b(it|its|it's|that|this|those|these|they|them|their|theirs|he|she|him|her|ones?)\b")
_CONTINUATION_STARTERS = (
    "and ", "but ", "also", "so ", "what about", "how about", "what if", "then ",
    "ok so", "okay so", "or ", "what else", "same ", "why not", "in that case",
)
_VARIABLE_REF = re.compile(
    r"\b(the|that|this|those|these)\s+(function|error|code|method|class|example|command|file|"
    r"variable|result|output|answer|approach|option|step|issue|problem|query|table|setting|"
    r"one|other one|other|first one|second one|last one|previous one|former|latter|same|above)\b")
_ELABORATION_SIGNALS = (
    "more detail", "elaborate", "explain further", "tell me more", "go on", "continue",
    "expand on", "clarify", "for example", "an example", "what do you mean", "say more",
    "why is that", "how so", "in more depth", "more about", "dig deeper", "go deeper",
)
_SHORT_FOLLOWUP = re.compile(
    r"^(why|how|really|and|examples?|such as|like what|which|when|where|who|what|how come|so|more)\b")

# --- social / profile / privacy signals -------------------------------------
_GREETING = re.compile(
    r"^\W*(hi|hello|hey|heya|hiya|howdy|yo|greetings|good (morning|afternoon|evening|day)|"
    r"what'?s up|sup)\b")
_NAME = re.compile(
    r"\b(?:call me|my name is|my name's|i am called|i'm called)\s+([^\W\d_][\w'\-]{0,39})",
    re.IGNORECASE)
_NOT_A_NAME = frozenset(
    "not a an the what that this just also never later back tomorrow now when if at on in please "
    "again sometime soon maybe asap tonight today whenever anytime whatever".split())
_PROFILE_STATEMENT = re.compile(
    r"\b(my name is|my name's|i'm called|i am called|i prefer|i like|i love|i hate|"
    r"i dislike|i work (as|at|in|for|on)|i live in|i'm from|i am from|(i am|i'm) an? "
    r"(developer|engineer|student|teacher|researcher|designer|manager|scientist|analyst|beginner|"
    r"expert|doctor|nurse|lawyer|programmer|administrator|admin|architect|consultant)|"
    r"my (favou?rite|preferences?|pronouns) (is|are)|remember that i|please remember)\b")
#: Asking what the assistant calls the user ("what name do you have saved for me", "how is my name listed"),
#: asked as a question; not how to change a name ("how do i change my name?" asks the knowledge base).
_OWN_NAME = re.compile(r"\bmy (first |last |full |current )?name\b|\bnames? (that )?you (have|use|call|know)\b|"
                       r"\bnames? for me\b|\bnames?(\s+\w+){0,3}\s+(saved|stored|listed)\b|"
                       r"\b(call|refer to|address) me\b|"
                       r"\bknow me (as|by)\b|\bme saved\b")
_NAME_CHANGE = re.compile(r"\b(chang(e|es|ed|ing)|renam\w*|new|legal|legally|maiden)\b")
_ASKS_TO_KNOW = re.compile(r"^\W*(let me know|i (want|need|wanna) (to )?know|say|guess)\b")
_PROFILE_QUESTION = re.compile(
    r"\b(what'?s my name|what is my name|who am i|do you (know|remember) (my (name|preferences)|"
    r"who i am|what i (said|told you|like|prefer))|"
    r"what do i (prefer|like)|what are my (preferences|settings)|what'?s my (role|job|team)|"
    r"what is my (role|job|team|preference))\b")
_PERSONAL_REF = re.compile(r"\b(my|mine|me|i|i'm|i've|i'd|i'll|myself|our|ours|we)\b")
#: Requests about what the assistant keeps of the user. "Privacy" alone is a topic ("what are the privacy
#: implications of face recognition?", "Facebook privacy control tips"): only "your / my / our privacy" asks.
_PRIVACY = re.compile(
    r"\b(what do you (know|remember|store|keep) about me|what (have|did) you (stored?|saved?|"
    r"kept|learned|remembered) about me|what data do you|"
    r"(delete|erase|remove|wipe|clear) (all )?(my|of my) (data|info|information|profile|history|details)|"
    r"(^|please |can you |could you |i want you to |you should )forget (about )?"
    r"(me|my|everything|what i|it all|that i|(this|our) conversation)|"
    r"don'?t (remember|store|save) (this|that|my|anything)|"
    r"(your|my|our) privacy)\b")
_NOTES_REQUEST = re.compile(
    r"\b(what did we (decide|conclude|agree|settle|say|suspect|think)|"
    r"our (conclusions?|decisions?|hypothes[ie]s|open questions?)|remind me (of |what )?(our|we)\b|"
    r"(the )?conclusions? (so far|we)|open questions?|where did we leave off|recap|"
    r"summari[sz]e (our|the|this) (discussion|conversation|decisions))\b")
_FRUSTRATED = re.compile(
    r"(\b(that'?s|this is|it'?s|you'?re|still) (wrong|not right|incorrect|useless|not helpful)|"
    r"\bnot what i (asked|meant|wanted)|\byou('re| are)? not (listening|helping|understanding)|"
    r"\b(useless|frustrat\w*|annoying|ridiculous|wtf|ugh+|argh+)\b|\bdoesn'?t (help|work)|"
    r"\bi (already|just) (said|told|asked)|\bcome on\b|\bno,? no\b|!{2,}|\?{3,})")
_POSITIVE = re.compile(
    r"\b(thanks|thank you|great|perfect|awesome|excellent|exactly|that helps|helpful|"
    r"love it|nice|brilliant|fantastic)\b")
_QUESTION_START = re.compile(
    r"^\W*(what|how|why|when|where|which|who|whom|whose|is|are|was|were|do|does|did|can|could|should|"
    r"would|will|shall|may|might|must|has|have|had|explain|describe|define|compare|list|tell me|"
    r"summari[sz]e|give me|show me)\b")
#: What opens a request rather than a question ("please cancel ...", "i need to book ...", "play ...").
_REQUEST_START = re.compile(
    r"^\W*(please|pls|i need|i want|i'd like|i would like|help me|cancel|book|set|find|check|call|play|send|"
    r"remind|add|turn)\b")
_WORD = re.compile(r"[\w']+")
_LETTERS = re.compile(r"[^\W\d_]+")
_VOWELS = frozenset("aeiouy\u00e0\u00e1\u00e2\u00e4\u00e8\u00e9\u00ea\u00eb\u00ec\u00ed\u00ee\u00ef\u00f2\u00f3\u00f4\u00f6\u00f9\u00fa\u00fb\u00fc")


@dataclass(frozen=True)
class ContextFeatures:
    """What the gate knows about one message before any retrieval."""

    normalized: str
    word_count: int
    has_question_mark: bool
    history_length: int
    followup_score: float
    followup_signals: tuple[str, ...]
    is_followup: bool
    is_greeting: bool
    is_profile_statement: bool
    is_profile_question: bool
    has_personal_reference: bool
    privacy_signal: bool
    notes_request: bool
    tone_signal: str  # "neutral" | "frustrated" | "positive"
    low_entropy: bool  # nothing word-like to search for ("hmm", "...", "jjjj")
    has_profile: bool
    stated_name: str | None
    topic_similarity: float | None
    is_question: bool = False  # a question mark, or opens like one ("how does...", "can you...")
    records_note: bool = False  # a decision or open-question cue ("let's go with", "we still need to")


def normalize(text: str) -> str:
    """Lower-case, straighten quotes and collapse whitespace so rules see one spelling."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(text.lower().split())


def words_of(normalized: str) -> list[str]:
    return _WORD.findall(normalized)


def followup_signals(q: str, words: Sequence[str], history_length: int) -> tuple[str, ...]:
    """Names of the structural cues that tie ``q`` to earlier turns (none without history)."""
    if history_length == 0:
        return ()
    fired = []
    if _PRONOUN_DEPS.search(q):
        fired.append("pronoun")
    if q.startswith(_CONTINUATION_STARTERS):
        fired.append("starter")
    if _VARIABLE_REF.search(q):
        fired.append("reference")
    if any(sig in q for sig in _ELABORATION_SIGNALS):
        fired.append("elaboration")
    if 0 < len(words) <= 3 and history_length >= 2 and (_SHORT_FOLLOWUP.match(q) or q.endswith("?")):
        fired.append("short_question")
    return tuple(fired)


def signal_weights(s: Settings) -> dict[str, float]:
    """Weight of each follow-up cue, from the ``gate_followup_weight_*`` settings."""
    return {"pronoun": s.gate_followup_weight_pronoun, "starter": s.gate_followup_weight_starter,
            "reference": s.gate_followup_weight_reference, "elaboration": s.gate_followup_weight_elaboration,
            "short_question": s.gate_followup_weight_short_question}


def followup_score(signals: Sequence[str], settings: Settings | None = None) -> float:
    """Weighted sum of cues, capped at 1.0; syntax, not embeddings, so it is cheap and explainable."""
    weights = signal_weights(settings or Settings())
    return round(min(sum(weights[s] for s in signals), 1.0), 4)


def stated_name(message: str) -> str | None:
    """The name in "call me X" / "my name is X", as written; None when absent or implausible."""
    match = _NAME.search(message)
    if not match or match.group(1).lower() in _NOT_A_NAME:
        return None
    return match.group(1).strip("'-")


def is_low_entropy(q: str) -> bool:
    """True when no token looks like a word: a query like this cannot earn retrieval."""
    for token in _LETTERS.findall(q):
        letters = set(token)
        if not token.isascii() or (len(letters) >= 2 and letters & _VOWELS):
            return False
    return True


def tone_signal(q: str) -> str:
    if _FRUSTRATED.search(q):
        return "frustrated"
    return "positive" if _POSITIVE.search(q) else "neutral"


def topic_similarity(message_vector: np.ndarray | None,
                     history_vectors: np.ndarray | Sequence[np.ndarray] | None,
                     settings: Settings | None = None) -> float | None:
    """Cosine of the message to the mean of the last ``gate_topic_recent_vectors`` user-message vectors."""
    if message_vector is None or history_vectors is None or len(history_vectors) == 0:
        return None
    recent_n = (settings or Settings()).gate_topic_recent_vectors
    first = history_vectors[0]
    if len(history_vectors) == 1 and type(first) is np.ndarray and first.ndim == 1:
        centre = as_f32(first)  # the mean of one vector is that vector, bit for bit
    else:
        recent = np.asarray(history_vectors, dtype=np.float32)[-recent_n:]
        centre = (recent[0] if len(recent) == 1 else recent.mean(axis=0)).ravel()
    vec = as_f32(message_vector)
    denom = float(norm(centre) * norm(vec))  # np.linalg.norm's values, in fewer numpy calls
    if denom == 0.0 or not np.isfinite(denom):
        return None
    return clip_unit(np.dot(centre, vec) / denom)


def asks_profile(normalized: str, is_question: bool) -> bool:
    """A question about what bara knows of the user: a stored preference, role, or the name it calls them by
    (``is_question``: the message's own question test, computed once by :func:`compute_features`)."""
    if _PROFILE_QUESTION.search(normalized):
        return True
    asks = is_question or bool(_ASKS_TO_KNOW.match(normalized))
    return asks and bool(_OWN_NAME.search(normalized)) and not _NAME_CHANGE.search(normalized)


def after_greeting(normalized: str) -> str | None:
    """What follows a greeting opener, past a short vocative before a comma ("hi there,", "hey siri,");
    None when the message does not open with a greeting."""
    opener = _GREETING.match(normalized)
    if opener is None:
        return None
    rest = normalized[opener.end():].lstrip(" ,!.")
    head, comma, tail = rest.partition(",")
    return tail.strip() if comma and len(head.split()) <= 2 else rest


def asks_after_greeting(normalized: str) -> bool:
    """Whether what follows a greeting opener asks a question or makes a request ("hey, have you approved
    my vacation time yet", "hey siri, please cancel my reservation"): the greeting then only opens the
    message."""
    rest = after_greeting(normalized)
    return rest is not None and bool(_QUESTION_START.match(rest) or _REQUEST_START.match(rest))


def only_greets(normalized: str, most_words: int) -> bool:
    """A greeting that says nothing more than a few words ("hello there my friend"): neither a question
    nor a request follows it, and at most ``most_words`` words do. "hey, flip me a coin" or "hey computer,
    make a reservation for 2" go on to ask for something in words no request pattern lists."""
    rest = after_greeting(normalized)
    if rest is None or asks_after_greeting(normalized):
        return False
    return len(_WORD.findall(rest)) <= most_words


def clip_unit(value: float) -> float:
    """``float(np.clip(value, -1.0, 1.0))`` for a scalar, without numpy's array machinery (NaN stays NaN)."""
    return float(max(min(value, 1.0), -1.0))


def compute_features(message: str, history: Sequence[Utterance], profile: Mapping[str, str],
                     message_vector: np.ndarray | None = None,
                     history_vectors: np.ndarray | Sequence[np.ndarray] | None = None,
                     *, settings: Settings | None = None) -> ContextFeatures:
    """Extract every gate feature of ``message`` given the prior turns and stored profile.

    ``history_vectors`` are embeddings of earlier *user* messages, oldest first.
    """
    cfg = settings or Settings()
    threshold = cfg.gate_followup_threshold
    q = normalize(message)
    words = words_of(q)
    signals = followup_signals(q, words, len(history))
    score = followup_score(signals, cfg)
    is_question = "?" in q or bool(_QUESTION_START.match(q))
    profile_question = asks_profile(q, is_question)
    return ContextFeatures(
        normalized=q, word_count=len(words), has_question_mark="?" in q,
        history_length=len(history), followup_score=score, followup_signals=signals,
        is_followup=score >= threshold, is_greeting=bool(_GREETING.match(q)),
        is_profile_statement=bool(_PROFILE_STATEMENT.search(q)) and not profile_question,
        is_profile_question=profile_question,
        has_personal_reference=bool(_PERSONAL_REF.search(q)),
        privacy_signal=bool(_PRIVACY.search(q)), notes_request=bool(_NOTES_REQUEST.search(q)),
        tone_signal=tone_signal(q), low_entropy=is_low_entropy(q), has_profile=bool(profile), stated_name=stated_name(message),
        topic_similarity=topic_similarity(message_vector, history_vectors, cfg),
        is_question=is_question, records_note=records_note(message),
    )
