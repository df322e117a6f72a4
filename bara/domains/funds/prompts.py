"""Every reply the offline rule router writes for the portfolio assistant (chit-chat, refusals, advice
declines, failure and retry notes, labels). Figures are never here: answer templates in
:mod:`bara.domains.funds.router_text` copy them from tool results.
"""

from __future__ import annotations

CHITCHAT = {
    "greeting": "Hello{name}! I can look up your holdings, transactions, XIRR and allocation, compare funds "
                "from AMFI NAV data, and search fund fact sheets and finance articles.",
    "thanks": "You're welcome{name}.",
    "goodbye": "Goodbye{name}.",
    "acknowledgement": "OK.",
    "testing": "I'm here. Ask me about your portfolio, for example: what is my XIRR?",
    "meta": "I'm bara's portfolio assistant. I compute figures about your own mutual fund portfolio with "
            "tools and search fund fact sheets and finance articles; I don't give buy or sell advice.",
    "low_entropy": "I couldn't find a question in that. Ask me about your portfolio or a fund.",
}
REFUSALS = {
    "other_user": "I can't share another investor's portfolio, holdings, transactions or returns. I can only "
                  "access your own account{name}; ask me about your portfolio instead.",
    "out_of_scope": "That's outside what I can help with. I answer questions about your mutual fund portfolio, "
                    "about funds, and about personal finance.",
}
ADVICE = ("I can't give investment advice or tell you whether to buy, sell or hold. Here are the facts "
          "I can share so you can decide (or ask a SEBI-registered adviser):")
ADVICE_NO_FACTS = "Name a fund and I can show its category, fund house and trailing returns from AMFI data."
NOTHING = "I couldn't find anything for that. Try naming a fund or asking about your holdings, XIRR or allocation."
NO_EXPENSE = "AMFI NAV data carries no expense ratios, so I can't quote them for these funds."
RETRIED = "(The first search, for \"{first}\", found little, so I searched again for \"{again}\".)"
FAILED = "I couldn't get {what}: {error}"
LABELS = {"search_documents": "matching documents", "compute_xirr": "your XIRR", "compare_funds": "the comparison",
          "get_holdings": "your holdings", "get_transactions": "your transactions",
          "asset_allocation": "your allocation"}
BY_LABEL = {"category_group": "asset class", "fund_house": "fund house", "scheme": "scheme"}
