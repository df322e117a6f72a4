"""The funds domain as a plug-in (:class:`bara.domain.Domain`): its schema, its six tools, the fund
repository they read, the portfolio assistant of ``agent`` mode and its settings section
(:class:`~bara.domains.funds.settings.FundsSettings`, ``router_*``: the offline rule router's thresholds). Listed in pyproject's ``bara.domains`` entry
points and in :data:`bara.plugins.BUILTIN_DOMAINS`; the HTTP service, MCP and the CLI reach it only
through :func:`bara.domain.discover`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from bara.domains.funds.repo import FundsRepo
from bara.domains.funds.settings import FundsSettings
from bara.errors import InputError
from bara.store.base import SqlRunner

if TYPE_CHECKING:
    from bara.agent.tools import Tool
    from bara.app import Bara
    from bara.domains.funds.assistant import AgentAssistant


class FundsDomain:
    name = "funds"
    settings_prefix = "router_"
    settings_model = FundsSettings
    has_assistant = True

    def register(self) -> None:
        from bara.domains.funds.schema import register

        register()

    def loaded(self, store: SqlRunner) -> bool:
        return FundsRepo(store).has_users()

    def tools(self) -> dict[str, "Tool"]:
        from bara.domains.funds.tools import build_fund_tools

        return build_fund_tools()

    def services(self, store: SqlRunner) -> Mapping[str, Any]:
        return {"funds": FundsRepo(store)}

    def assistant(self, bara: "Bara") -> "AgentAssistant":
        from bara.domains.funds.assistant import AgentAssistant

        return AgentAssistant(bara)

    def check_user(self, store: SqlRunner, user_id: str) -> None:
        if FundsRepo(store).user_name(user_id) is None:
            raise InputError(f"user {user_id!r} has no funds account here: pick an id from `bara funds users`")


DOMAIN = FundsDomain()
