"""Does an offered tool fit a request at all? Evidence beyond embedding similarity, for abstaining.

Embedding similarity says a request and a tool are on the same topic; it cannot
tell "roots of a linear equation" from a quadratic solver, or a pet shop from a
grocery finder. Two cheap, explainable checks help the router call nothing when
no tool fits (BFCL "irrelevance"):

* :func:`name_coverage`: the share of the tool name's content words (``solve_
  quadratic_equation`` -> quadratic, equation) that the request mentions, by a
  shared 5-letter stem or a rapidfuzz ratio >= 85. A tool named for the task
  asked is strong evidence; one named for a neighbouring task is not.
* :func:`contradicts`: the request asks for the opposite of what the name says
  ("lowest score" for ``high_score``, "external rate" for ``internal_rate_of_return``):
  it mentions a word's antonym (:data:`ANTONYMS`) and not the word itself.
* :func:`fillable`: the request carries a value for each required numeric
  argument (a number or a number word per required integer/number parameter, at
  least one number for a required numeric array) and, for a required enum, one
  of its values; an argument the request assigns by name (``x=data['sales']``) is
  filled whatever its kind, and so is one whose schema or description states a default
  ("Default is 52"). Counts that are common knowledge fill numbers too: "a king from a
  deck" states two (4 of 52) without a digit (:data:`_KNOWN_COUNTS`), and a named historical event
  a year (:data:`_NAMED_EVENT`). A required enum is filled by one of its values or when the text
  names what it ranges over (:func:`enum_hinted`). A request that cannot fill a tool's arguments
  is not a request for that tool.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from rapidfuzz import fuzz

#: Verbs and glue that every tool name carries; they say nothing about which task it does.
GENERIC_NAME_WORDS = frozenset(
    "get set calculate calc compute find search retrieve fetch lookup look up info information details detail data "
    "by for of the a an to and in on with from api service services tool tools func function v1 v2 v3 list query "
    "check make create generate do is at per based all new".split())
_NUMBER_WORDS = (r"\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|"
                 r"fifty|hundred|thousand|million|billion|half|quarter|double|twice|single|once|dozen|first|second|"
                 r"third|fourth|fifth|last|next|today|tomorrow|yesterday|week|month|year|decade)\b")
#: Words and phrases that state a count or a rate without a digit: "compounded quarterly" (4 a year),
#: "duplicates every hour" (1 hour), or a state that fixes a value ("dropped", "from rest": initial speed 0).
_RATE_WORDS = re.compile(r"\b(?:(?:bi|semi)?(?:hourly|daily|weekly|monthly|quarterly|annually|yearly)|biannually|"
                         r"(?:every|each) (?:second|minute|hour|day|night|week|month|quarter|year)|"
                         r"(?:from|at) rest|dropped|released)\b")
#: Things of games of chance whose count is common knowledge: a deck (52 cards), a suit (13), a rank (4), a
#: poker hand, a die (6 faces), a coin (2 sides). Each mention states one number ("a king from a deck": 4 of 52).
_KNOWN_COUNTS = re.compile(r"\b(?:decks?|suits?|hearts|spades|clubs|diamonds|kings?|queens?|jacks?|aces?|"
                           r"full house|flush|royal flush|straight|pairs?|dice|die|coins?|heads|tails)\b")
#: A named historical event fixes a year: "the American Civil War", "the Treaty of Versailles". One capitalised
#: word before the keyword is enough to find it (a run of them, ``(?:[A-Z][a-z]+ )+``, would backtrack
#: quadratically over a long run of capitalised words and finds the same events).
_NAMED_EVENT = re.compile(r"\b[A-Z][a-z]+ (?:War|Revolution|Rebellion|Uprising|Crisis|Depression|Plague|"
                          r"Reformation|Renaissance)\b|\b(?:Treaty|Battle|Siege|Fall|Congress|Council) of [A-Z]")
#: A description stating the argument's default value: "Default is 52", "defaults to 'Culture'".
_DEFAULT = re.compile(r"\bdefaults?(?: value)?(?: is| to| of)?\s*(?:[:=]\s*)?['\"]?[\w.-]", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAMEL = re.compile(r"([a-z])([A-Z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_WORDS = re.compile(r"[a-z0-9]+")


def name_words(name: str) -> list[str]:
    """Content words of a tool name: ``map_service.get_directions`` -> ["map", "directions"]."""
    parts = _SPLIT.split(_CAMEL.sub(r"\1 \2", name).lower())
    return [p for p in parts if len(p) >= 3 and not p.isdigit() and p not in GENERIC_NAME_WORDS]


#: Endings that inflect a word of four letters ("laws", "maps") without making another word of it.
_INFLECTIONS = ("", "s", "es", "ed", "d", "er", "ers", "ing")


def _same_stem(word: str, token: str) -> bool:
    """Shared 5-letter stem; a 4-letter word only with an inflection ("maps" ~ "map", not "laws" ~ "lawsuit")."""
    short, long_ = sorted((word, token), key=len)
    if len(short) >= 5:
        return short[:5] == long_[:5]
    return len(short) == 4 and long_.startswith(short) and long_[4:] in _INFLECTIONS


def _mentions(word: str, tokens: list[str]) -> bool:
    for token in tokens:
        if word == token or _same_stem(word, token) or (len(word) >= 4 and fuzz.ratio(word, token) >= 85):
            return True
    return False


_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DATE = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b" + _MONTH + r"\.? \d{1,2}(?:st|nd|rd|th)?\b|"
                   r"\b\d{1,2}(?:st|nd|rd|th)? (?:of )?" + _MONTH + r"\b|\b(?:today|tomorrow|yesterday|monday|tuesday|"
                   r"wednesday|thursday|friday|saturday|sunday)\b")
_TIME = re.compile(r"\b\d{1,2}:\d{2}\b|\b\d{1,2} ?(?:am|pm)\b|\bo'clock\b")
_COORDINATES = re.compile(r"-?\d{1,3}\.\d+\s*°?\s*[NS]?\s*,\s*-?\d{1,3}\.\d+")
#: A conversion asked without the word: "how many cups are in 3 pints", "how much is 20 euros in yen".
_CONVERSION = re.compile(r"\bhow many \w+(?: \w+)? (?:are |is |can i get |do i get |will i get |would i get )?"
                         r"(?:in|for|make|equal|per)\b|\bhow much is [\d.,]+ ?\w+(?: \w+)? in\b")
#: Currencies by name or ISO code (not by symbol: "$200" is an amount, not a request about currencies).
_CURRENCY = re.compile(r"\b(?:dollars?|euros?|yen|yuan|renminbi|rupees?|pesos?|francs?|sterling|rubles?|roubles?|"
                       r"usd|eur|gbp|jpy|cad|aud|inr|cny|chf|mxn)\b")
_YEAR = re.compile(r"\b(?:1\d{3}|20\d{2})\b")
#: The past by a year before 1950, a century ("the 19th century") or a named event (case-sensitive part).
_PAST = re.compile(r"\b(?:1[0-8]\d{2}|19[0-4]\d)\b|\b\d{1,2}(?:st|nd|rd|th) century\b|" + _NAMED_EVENT.pattern)
_ROYAL = r"kings?|queens?|emperors?|empress(?:es)?|monarchs?|pharaohs?|tsars?|czars?|sultans?"
_MONARCH = re.compile(rf"\b(?:{_ROYAL})\b")
_LEADER = re.compile(rf"\b(?:{_ROYAL}|presidents?|prime ministers?|chancellors?|rulers?|dictators?)\b")
#: Name words that name a kind of value: the text mentions them by carrying such a value
#: ("on December 13, 2019" mentions ``..._date``; "46.60,1.88" mentions ``..._by_coordinates``;
#: "how many ounces in 2 pounds" mentions ``..._convert``; "500 US dollars" mentions ``currency_...``).
VALUE_WORDS = {"date": _DATE, "dates": _DATE, "day": _DATE, "time": _TIME, "coordinates": _COORDINATES,
               "coordinate": _COORDINATES, "convert": _CONVERSION, "conversion": _CONVERSION,
               "converter": _CONVERSION, "currency": _CURRENCY, "currencies": _CURRENCY, "year": _YEAR,
               "years": _YEAR, "history": _PAST, "historic": _PAST, "historical": _PAST,
               "leader": _LEADER, "leaders": _LEADER, "monarch": _MONARCH,
               "monarchs": _MONARCH, "ruler": _LEADER, "rulers": _LEADER}


def _carries(pattern: re.Pattern[str], text: str, low: str) -> bool:
    """A value of the pattern's kind in the text: lower-case patterns on ``low``, capitalised names on ``text``."""
    return pattern.search(low) is not None or pattern.search(text) is not None


def name_coverage(name: str, text: str) -> float:
    """Share of the name's content words mentioned in ``text``, by a shared stem or, for a word naming a
    kind of value (:data:`VALUE_WORDS`), by a value of that kind (0 when the name has none)."""
    words = name_words(name)
    tokens = _WORDS.findall(text.lower())
    low = text.lower()
    hits = (_mentions(w, tokens) or (w in VALUE_WORDS and _carries(VALUE_WORDS[w], text, low)) for w in words)
    return sum(hits) / len(words) if words else 0.0


def _forms(*words: str) -> frozenset[str]:
    return frozenset(words)


#: Opposite name words, each with the forms that mention it ("low", "lower", "lowest").
ANTONYMS: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (_forms("high", "higher", "highest"), _forms("low", "lower", "lowest")),
    (_forms("internal", "inner", "interior"), _forms("external", "outer", "exterior")),
    (_forms("increase", "increases", "increased", "increasing", "rise", "gain", "gains"),
     _forms("decrease", "decreases", "decreased", "decreasing", "drop", "fall", "loss", "losses")),
    (_forms("import", "imports", "imported"), _forms("export", "exports", "exported")),
    (_forms("add", "adds", "added", "adding", "insert"), _forms("remove", "removes", "removed", "removing", "delete")),
    (_forms("start", "starting", "begin", "beginning"), _forms("end", "ending", "finish", "stop")),
    (_forms("min", "minimum", "minimal"), _forms("max", "maximum", "maximal")),
    (_forms("profit", "profits"), _forms("loss", "losses")),
    (_forms("encrypt", "encryption", "encode"), _forms("decrypt", "decryption", "decode")),
)


def contradicts(name: str, text: str) -> bool:
    """The text mentions the opposite of one of the name's words and none of that word's forms (a name
    that carries both, such as ``stock_high_low``, serves either)."""
    words = set(_SPLIT.split(_CAMEL.sub(r"\1 \2", name).lower()))
    tokens = set(_WORDS.findall(text.lower()))
    for a, b in ANTONYMS:
        for mine, other in ((a, b), (b, a)):
            if words & mine and not words & other and tokens & other and not tokens & mine:
                return True
    return False


def spec_text(name: str, description: str, parameters: Mapping[str, Any]) -> str:
    """A tool as one text to embed: its name's content words, its description and each parameter's name and
    description ("cooking conversion: Convert cooking measurements... quantity: The quantity to be converted; ...")."""
    props = parameters.get("properties") or {}
    params = "; ".join(f"{k}: {v.get('description', '')}" for k, v in props.items() if isinstance(v, Mapping))
    return f"{' '.join(name_words(name))}: {description} {params}"


def numbers_in(text: str) -> int:
    low = text.lower()
    return (len(_NUMBER.findall(text)) + len(re.findall(_NUMBER_WORDS, low)) + len(_RATE_WORDS.findall(low))
            + len(_KNOWN_COUNTS.findall(low)) + len(_NAMED_EVENT.findall(text)))


def has_default(prop: Mapping[str, Any]) -> bool:
    """The schema gives the argument a default, or its description states one: the text need not."""
    return "default" in prop or _DEFAULT.search(str(prop.get("description") or "")) is not None


def assigns(key: str, text: str) -> bool:
    """The text gives argument ``key`` by name, as code does: ``x=data['sales']`` (not ``c = 0``, an equation)."""
    return re.search(rf"(?<![\w.]){re.escape(key)}=(?!=)", text) is not None


#: Words of a parameter description that say nothing about what its values range over.
_VAGUE = GENERIC_NAME_WORDS | frozenset("specific type kind level value values option options default you your "
                                        "interested want wish which that this these those name given".split())


def enum_hinted(prop: Mapping[str, Any], name: str, text: str) -> bool:
    """The text names what a required enum ranges over, in words of its description that the tool name
    does not already carry ("European history" for a region "of Europe"): a caller picks the value."""
    own = set(name_words(name))
    words = {w for w in _WORDS.findall(str(prop.get("description") or "").lower())
             if len(w) >= 4 and w not in _VAGUE and not _mentions(w, list(own))}
    tokens = _WORDS.findall(text.lower())
    return any(_mentions(w, tokens) for w in words)


def fillable(parameters: Mapping[str, Any], text: str, name: str = "") -> bool:
    """True when ``text`` can supply the required numeric and enum arguments of this JSON schema (an enum
    also when the text names what it ranges over, :func:`enum_hinted`, given the tool ``name``)."""
    props = parameters.get("properties") or {}
    required = [k for k in parameters.get("required") or [] if isinstance(props.get(k), Mapping)]
    named = {k for k in required if assigns(k, text) or has_default(props[k])}
    numeric = [k for k in required if props[k].get("type") in ("integer", "number") and k not in named]
    if len(numeric) > numbers_in(text):
        return False
    low = text.lower()
    for key in (k for k in required if k not in named):
        prop = props[key]
        values = prop.get("enum")
        if values and not any(str(v).lower() in low or fuzz.partial_ratio(str(v).lower(), low) >= 85 for v in values) \
                and not (name and enum_hinted(prop, name, text)):
            return False
        items = prop.get("items") if isinstance(prop.get("items"), Mapping) else {}
        if prop.get("type") == "array" and items.get("type") in ("integer", "number") and not numbers_in(text):
            return False
    return True
