"""What kind of request a message is, read the way users actually write: typos, Hinglish, paraphrase.

Pure functions over text; the router (:mod:`bara.domains.funds.router`) decides with them.

* :func:`normalise` lower-cases, maps common Hinglish words to English ("mera" ->
  "my", "dikhao" -> "show", "bata hua" -> "split") and corrects misspelt
  keywords ("transcations" -> "transactions") with rapidfuzz ``fuzz.ratio``, so
  one set of English rules serves every spelling.
* :func:`other_person` finds a request about someone else's portfolio: a
  relative or friend ("my brother", "my wife's"), another known user's name,
  "his/her" holdings, Hinglish possessives ("bilal ka portfolio"), everyone else.
* :func:`advice`, :func:`on_topic`, :func:`concept`, :func:`compares`,
  :func:`fall_question`, :func:`thanks` classify the rest.
"""

from __future__ import annotations

import re
from typing import Collection

from rapidfuzz import fuzz, process

from bara.text.ordered import Ordered

_R = re.compile
#: Hinglish (romanised Hindi) words and pairs -> the English the rules read. Pairs first.
HINGLISH_PAIRS = {"bata hua": "split", "bate hue": "split", "ke paas": "have", "mere paas": "i have",
                  "ke liye": "for", "ke baare": "about", "ke saath": "with", "kitna raha": "how much",
                  "kaun kaun se": "which", "kaun se": "which", "bech dena": "sell", "bech du": "sell"}
HINGLISH = {
    **dict.fromkeys("mera mere meri apna apne apni hamara hamare humara".split(), "my"),
    **dict.fromkeys("mujhe maine".split(), "i"),
    **dict.fromkeys("kitna kitne kitni".split(), "how much"),
    **dict.fromkeys("dikhao dikha dikhana batao bata batana".split(), "show"),
    **dict.fromkeys("kaunsa kaunse konsa konse kaun kon".split(), "which"),
    **dict.fromkeys("paisa paise paison".split(), "money"),
    **dict.fromkeys("munafa fayda faida".split(), "profit"),
    **dict.fromkeys("nuksan nuksaan".split(), "loss"),
    **dict.fromkeys("saalana salana".split(), "annual"),
    **dict.fromkeys("kharid kharidna kharidu kharidun kharide".split(), "buy"),
    **dict.fromkeys("bech bechna bechu bechun beche".split(), "sell"),
    **dict.fromkeys("chahiye chahie".split(), "should"),
    "kya": "what", "mein": "in", "liye": "bought", "liya": "bought", "pichle": "recent", "saare": "all",
    "sab": "all", "matlab": "meaning", "hota": "is", "baare": "about", "kyun": "why", "kyu": "why",
}
#: Words the rules key on; a misspelling within router_keyword_score of one is read as it.
KEYWORDS = ("transactions", "transaction", "holdings", "holding", "portfolio", "allocation", "redemption",
            "redemptions", "redeemed", "investments", "investment", "invested", "compare", "comparison",
            "volatility", "drawdown", "expense", "annualised", "statement", "purchases", "diversification",
            "performance", "returns", "units", "worth", "value", "percentage")
_WORD = _R(r"\d{4}-\d{2}-\d{2}|[a-z][a-z0-9_']*|\d+(?:[.,]\d+)*|[^\sa-z\d]+")

PERSONAL = _R(r"\b(my|mine|i|me|i'm|i've|i'd|im|ive)\b")
DATA = (r"(portfolios?|holdings?|transactions?|xirr|sips?|investments?|invested|invest|accounts?|money|"
        r"statements?|units?|gains?|profits?|allocation|redemptions?|returns?|funds?|savings|worth|net worth)")
RELATIONS = ("brother bro sister sis mom mother mum mummy maa dad father papa wife husband son daughter friend "
             "colleague coworker co-worker neighbour neighbor boss uncle aunt aunty cousin partner spouse parents "
             "grandfather grandmother grandpa grandma nana nani dada dadi bhai bhaiya didi behen chacha chachi "
             "mama mami girlfriend boyfriend fiance fiancee roommate flatmate manager client")
_RELATION = _R(r"\b(?:my|our|his|her|their|a)\s+(?:\w+\s+)?(?:" + "|".join(RELATIONS.split()) + r")s?\b|\b(?:"
               + "|".join(RELATIONS.split()) + r")s?'s?\b")
_THIRD = _R(r"\b(?:his|her|hers)\s+(?:\w+\s+)?" + DATA + r"\b|\btheir\s+(?:\w+\s+)?(?:portfolios?|holdings?|"
            r"transactions?|xirr|sips?|investments?|accounts?|money|statements?)\b")
_BULK = _R(r"\b(?:everybody|everyone|all the others|other (?:users|investors|people|customers|clients|members))"
           r"\b|\bothers'")
_DESI_POSSESSIVE = _R(r"\b([a-z]{3,})\s+(?:ka|ke|ki)\s+(?:\w+\s+)?" + DATA + r"\b")
_NOT_A_PERSON = frozenset("my fund scheme plan portfolio is us iss uss all which what this that aap apne aapke "
                          "market index nifty sensex amc sip equity debt".split())

ADVICE = Ordered(
    [r"\b(?:right|good|best|wrong|bad|ideal)\s+time\s+to\s+(?:buy|sell|exit|enter|invest|redeem|switch|book)\b",
     r"\b(?:top|best)\s+(?:\d+\s+|three\s+|five\s+)?(?:mutual\s+)?(?:funds?|schemes?|stocks?)\s+(?:to|for|in)\b"],
    [(r"\b(?:buy|sell|exit|redeem|switch|invest|enter)\w*\b", r"\bshould\b"),
     (r"\bshould\b", r"\b(?:buy|sell|exit|redeem)\b"),
     (r"\bswitch\w*\b", r"\b(?:smart|wise|good idea|sensible|worth it|better idea)\b"),
     (r"\bwhich\s+(?:fund|scheme|stock)s?\b", r"\b(?:buy|should|pick|choose)\b")])

FINANCE = _R(
    r"\b(?:funds?|invest\w*|portfolios?|returns?|xirr|cagr|navs?|sips?|stocks?|shares?|bonds?|etfs?|tax\w*|"
    r"expense|fees?|markets?|equity|equities|debt|hedge|index|indices|dividends?|interest|inflation|currenc\w*|"
    r"fiat|bank\w*|loans?|insurance|retire\w*|401\(?k\)?|ira|roth|advis\w*|financ\w*|wealth|prices?|"
    r"speculat\w*|assets?|allocation|holdings?|transactions?|redeem\w*|redemptions?|units?|amcs?|volatil\w*|"
    r"drawdowns?|risk\w*|credit|savings?|budget\w*|income|salary|pension|mutual|broker\w*|trading|trades?|crypto\w*|"
    r"bitcoin|gold|money|rupees?|inr|profits?|loss(?:es)?|gains?|compound\w*|elss|nps|ppf|deposits?|gilt|"
    r"liquid|arbitrage|cap|lump ?sums?|statements?|worth|valu\w*|econom\w*|recession|yields?|coupons?|"
    r"maturity|annuit\w*|mortgage|cash|accounts?|amfi|sebi|rbi|scheme|schemes|performance|perform\w*|"
    r"trailing|brokerage|capital gains?|buy|bought|sell|sold|purchas\w*|redeem\w*|exit loads?|aum|"
    r"benchmark\w*|alpha|beta|sharpe|ratios?|nifty|sensex|kyc|demat|folios?|stp|swp|nfo|ulip|corpus|lumpsum|"
    r"emi|fds?|trackers?|passive(?:ly)?|actively managed)\b|\bi (?:own|hold|have)\b")

CONCEPT = Ordered(
    [r"^(?:so |ok |and |but )?(?:what|what's|whats|wat)\s+(?:is|are|does|do)\b|\bexplain\b|\bdefine\b|"
     r"\bdefinition\b|\bmeaning\b|\bmeans\b|\bwhy\s+(?:does|do|is|are|would|should|can)\b|"
     r"\bdiff(?:erence|erent|ers?)?\b|\bhow\s+often\b|\bwhat\s+(?:type|kind)\s+of\b"],
    [(r"\bhow\s+(?:does|do|is|are)\b", r"\b(?:work|works|calculated|computed|measured|taxed|priced|differ\w*)\b"),
     (r"\bis\b", r"\bsame\b")])
COMPARE = _R(r"\b(?:compare\w*|comparison|vs\.?|versus|against|side by side|stack\w* up|fare\w*|better|worse|"
             r"outperform\w*|beat|beaten|more|less|higher|lower|than|or|which)\b")
_METRIC = _R(r"\b(?:returns?|perform\w*|volatil\w*|drawdowns?|risk\w*|1y|year|months?|did|done|doing|expense|"
             r"ratios?|fees?|costs?|navs?)\b")
_HOUSE = _R(r"\b(?:fund houses?|amcs?|asset management|fund compan\w+|mutual fund|mf)\b")
_SHARE = _R(r"\b(?:split|break ?down|break-?up|each|how much|percent|percentage|share|proportion|spread|"
            r"exposure)\b|%")
_FALL = _R(r"\b(?:fall|falls|fell|fallen|drop|drops|dropped|down|declin\w*|lost|losing|loss|underperform\w*|"
           r"crash\w*|tank\w*|negative|dip|dipped|slump\w*|red)\b")
_WHY = _R(r"\b(?:why|how come|what (?:caused|made|explains?|happened|went wrong)|reason)\b")
THANKS = _R(r"^(?:\W*(?:shukriya|dhanyavaad|dhanyawad|dhanyavad|thik hai|theek hai|thik|theek|accha|acha|achha|"
            r"bas|itna hi|ok|okay|cool|nice|haha+|lol|great|bye|talk later|see you|cheers)\W*)+$")


def normalise(text: str, keyword_score: float = 85.0) -> str:
    """Lower-cased text with Hinglish mapped to English and misspelt keywords corrected."""
    low = " ".join(text.replace("\u2019", "'").lower().split())
    for pair, english in HINGLISH_PAIRS.items():
        low = re.sub(rf"\b{pair}\b", english, low)
    out = []
    words: list[str] = _WORD.findall(low)
    for word in words:
        token = HINGLISH.get(word, word)
        if len(token) >= 5 and token.isalpha() and token not in KEYWORDS:
            hit = process.extractOne(token, KEYWORDS, scorer=fuzz.ratio, score_cutoff=keyword_score)
            token = hit[0] if hit else token
        out.append(token)
    return re.sub(r"\s+([,.?!:;])", r"\1", " ".join(out))


def personal(norm: str) -> bool:
    return bool(PERSONAL.search(norm))


def other_person(norm: str, own: Collection[str] = (), people: Collection[str] = ()) -> bool:
    """True when the message asks about someone else's money or portfolio."""
    own_low = {o.lower() for o in own} | {o.lower().removeprefix("u_") for o in own}
    data = re.search(r"\b" + DATA + r"\b", norm)
    if data and (_RELATION.search(norm) or _BULK.search(norm)):
        return True
    if _THIRD.search(norm):
        return True
    for m in _DESI_POSSESSIVE.finditer(norm):
        if m.group(1) not in _NOT_A_PERSON and m.group(1) not in own_low:
            return True
    names = {p.lower() for p in people} - own_low
    return bool(data) and any(re.search(rf"\b{re.escape(n)}\b", norm) for n in names if len(n) >= 3)


def advice(norm: str) -> bool:
    return bool(ADVICE.search(norm))


def on_topic(norm: str) -> bool:
    """Personal finance at all (a finance word, or something the user owns)."""
    return bool(FINANCE.search(norm))


def concept(norm: str) -> bool:
    """A question about an idea ("what is", "explain", "why does"), not about the user's own figures."""
    return bool(CONCEPT.search(norm)) and not personal(norm)


def compares(norm: str) -> bool:
    """With two or more schemes named: a comparison cue, or a question about their performance."""
    return bool(COMPARE.search(norm) or _METRIC.search(norm))


def fall_question(norm: str) -> bool:
    """"Why did X fall?" in either order ("X is down a lot, what happened?")."""
    return bool(_FALL.search(norm) and _WHY.search(norm))


def fund_house_split(norm: str) -> bool:
    """The user's own money by fund house ("which AMCs hold my money, how much with each")."""
    return personal(norm) and bool(_HOUSE.search(norm) and _SHARE.search(norm))


def thanks(norm: str) -> bool:
    """Acknowledgements and thanks, in English or Hinglish ("thik hai, dhanyavaad")."""
    return bool(THANKS.match(norm))
