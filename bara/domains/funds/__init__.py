"""Indian mutual funds: AMFI data, demo portfolios, metrics and the six agent tools.

Public API (lazy where it needs the agent layer, so schema imports stay light)::

    FUNDS_MIGRATIONS                      schema steps for the store
    load_amfi(runner, data_dir)           -> LoadReport
    create_demo_users(runner, seed=7)     -> ["u_asha", ...]
    FundsRepo(runner)                     holdings / transactions / cash_flows / find_scheme / nav_series
    build_fund_tools()                    -> {name: Tool} (six tools)
    scheme_fact_documents(runner), fiqa_documents(corpus_path)
    detect_refusal(message, own_names=()) -> reason code | None
"""

from __future__ import annotations

from typing import Any

from bara.domains.funds.facts import fiqa_documents, scheme_fact_documents
from bara.domains.funds.loader import LoadReport, load_amfi
from bara.domains.funds.repo import FundsRepo
from bara.domains.funds.schema import FUNDS_MIGRATIONS
from bara.domains.funds.users import (DEMO_USERS, REFUSE_ADVICE, REFUSE_OTHER_USER, REFUSE_OUT_OF_SCOPE,
                                      create_demo_users, detect_refusal)

__all__ = ["DEMO_USERS", "FUNDS_MIGRATIONS", "FundsRepo", "LoadReport", "REFUSE_ADVICE", "REFUSE_OTHER_USER",
           "REFUSE_OUT_OF_SCOPE", "build_fund_tools", "create_demo_users", "detect_refusal", "fiqa_documents",
           "load_amfi", "scheme_fact_documents"]


def build_fund_tools() -> dict[str, Any]:
    """The six fund tools (imports the agent layer on first use)."""
    from bara.domains.funds.tools import build_fund_tools as build

    return build()
