"""Stop-word lists, one per purpose. Each is used by exactly one analyser and is NOT interchangeable.

The lists differ on purpose: each was tuned (and measured) for its own consumer, so merging them
would change figures. Their values are frozen; a change here is a behaviour change.

* :data:`RETRIEVAL_STOPWORDS`   indexing and querying (lexical analyser, FTS5 and PostgreSQL tsvector).
* :data:`TOPIC_SWITCH_STOPWORDS`  conversation state: content words compared across recent queries.
* :data:`SCHEME_LEAD_STOPWORDS`   funds router: leading words trimmed off a candidate scheme-name run.
* :data:`REFORMULATION_FILLER`    funds router: question filler dropped when reformulating for search.
* :data:`FUND_NAME_NOISE`         funds repository: glue words ignored when matching fund names.
"""

from __future__ import annotations

#: The retrieval analyser's English list (the classic Snowball/NLTK-style list plus contraction
#: fragments and "will just also"). Used for the index AND the query, so both sides agree; it is the
#: widest list because BM25 ranking is hurt by frequent function words and loses nothing by dropping them.
RETRIEVAL_STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being
below between both but by can cannot could couldn't did didn't do does doesn't doing don't down during
each few for from further had hadn't has hasn't have haven't having he her here hers herself him himself
his how i if in into is isn't it its itself let's me more most mustn't my myself no nor not of off on
once only or other ought our ours ourselves out over own same shan't she should shouldn't so some such
than that the their theirs them themselves then there these they this those through to too under until
up very was wasn't we were weren't what when where which while who whom why with won't would wouldn't you
your yours yourself yourselves s t d ll m re ve y will just also
""".split())

#: Topic-switch detection (understand/state): a short list of question scaffolding ("what is",
#: "please tell/explain") so two queries count as on-topic only when they share a real content word.
#: Narrower than the retrieval list: words such as "not", "more" or "after" can carry the topic here.
TOPIC_SWITCH_STOPWORDS = frozenset(
    "a an the is are was were be been of to in on for and or but with about what how why when "
    "where which who do does did can could should would will i you me my it this that these those "
    "there please tell explain".split())

#: Scheme-name extraction (funds router): words that cannot START a fund name, trimmed off the front of
#: a capitalised run ("Compare HDFC ..." -> "HDFC ..."). Includes greetings and "fund" itself, which the
#: other lists lack, and keeps "all"/"not" out because they may begin a name.
SCHEME_LEAD_STOPWORDS = frozenset(
    "what what's whats why how compare show did does do is are was my the tell which when should i please can "
    "could give list and vs versus has have me get find between with of in for about explain a an on since from "
    "to until before after will would describe hi hello is it fund".split())

#: Query reformulation (funds router): conversational filler removed before a question is rewritten
#: into corpus vocabulary; keeps domain words, drops pronouns and intensifiers ("really", "much").
REFORMULATION_FILLER = frozenset(
    "a an the of to for in on at by with about and or is are was were be been do does did how why what whats "
    "what's which who when where can could would should will please tell me explain my i i'm i've me you your "
    "it its this that there their they them so just really any some much many".split())

#: Fund-name matching (funds repository): only the three glue words that AMFI names use
#: inconsistently ("X and Y Fund", "Fund of Funds"); anything wider would drop distinguishing words.
FUND_NAME_NOISE = frozenset({"and", "the", "of"})

#: Follow-up rewrite (understand/scaffold): words of an assistant's own scaffolding, never a topic of
#: the user's next query: citation and section labels ("Sources", "See", "Note", "Repeated"), hedges
#: and the reply's self-reference. A word here is never carried from an assistant turn into a query.
ASSISTANT_SCAFFOLDING = frozenset(
    "source sources see note notes repeated reference references citation citations cited according "
    "summary overview answer answers question questions document documents passage passages context "
    "provided mentioned above below following however therefore additionally also generally typically "
    "usually likely perhaps possibly probably might may seems seem appears appear unclear sure sorry "
    "unfortunately apologize hope helps help let know information details detail example examples "
    "step steps section sections heading title yes".split())

#: Follow-up rewrite (understand/term_scorer): words of a question's framing, never carried from an
#: earlier turn into a query ("interesting facts about bees" carries "bees"): evaluative adjectives,
#: request verbs and generic nouns that a human standalone rewrite leaves out.
REWRITE_FILLER = frozenset(
    "interesting fact facts learn know tell more main better best good important typical new old "
    "lot lots bit someone something anything everything people person thing things way ways kind "
    "kinds sort part parts needed need using use used begin began cause causes others else well "
    "really actually exactly maybe today yesterday now currently recently thanks great nice fine "
    "okay cool wow oh hmm please show find give explain describe mean meant want wanted like likes".split())
