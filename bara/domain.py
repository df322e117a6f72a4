"""What a surface holds of an assistant and of a domain, whichever implements them.

* :class:`TurnAssistant` (defined with :class:`~bara.app.Bara`, whose ``turn`` runs one):
  ``mode``, ``turn()`` and ``open_conversation()``; the gated and always pipeline (``bara.turn``) and a
  domain's own assistant implement it. :func:`build_assistant` builds the one of a mode
  (``Bara.assistant`` names it through :data:`bara.plugins.ASSISTANTS`).
* :class:`Domain`: a plug-in package under ``bara/domains/`` (or installed apart) that brings its
  schema steps, its tools, the services those tools use, optionally its own assistant (``agent``
  mode) and its settings section (a pydantic model, ``Settings.domains[<name>]``: bara.settings.sections). The HTTP service, MCP and the CLI find domains with :func:`discover`
  (the ``bara.domains`` entry points and :data:`bara.plugins.BUILTIN_DOMAINS`) and never import one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol

from bara import plugins
from bara.app import Bara, TurnAssistant
from bara.errors import InputError
from bara.llm.build import build_model
from bara.store.base import SqlRunner
from bara.turn.gated import Assistant, pipeline_mode

if TYPE_CHECKING:
    from pydantic import BaseModel

    from bara.agent.tools import Tool

__all__ = ["Domain", "TurnAssistant", "agent_assistant", "agent_domain", "build_assistant", "discover",
           "services_of", "tools_of"]


class Domain(Protocol):
    """A domain plug-in (see the module docstring); :func:`discover` returns the installed ones."""

    @property
    def name(self) -> str: ...

    @property
    def settings_prefix(self) -> str:
        """The prefix every field of :attr:`settings_model` shares (e.g. ``router_``): flat keys with it
        (``BARA_ROUTER_SIM_MIN``, ``router_sim_min`` in bara.toml) load into the domain's section."""
        ...

    @property
    def settings_model(self) -> "type[BaseModel] | None":
        """The model of the domain's settings section (``Settings.section(name, model)``), or None."""
        ...

    @property
    def has_assistant(self) -> bool:
        """Whether :meth:`assistant` builds one (the domain answers ``agent`` mode)."""
        ...

    def register(self) -> None:
        """Register the domain's tables, migrations and row-level security with the store registry."""
        ...

    def loaded(self, store: SqlRunner) -> bool:
        """True when the domain's data is in ``store`` (its tools have something to answer from)."""
        ...

    def tools(self) -> dict[str, "Tool"]:
        """The domain's agent tools by name."""
        ...

    def services(self, store: SqlRunner) -> Mapping[str, Any]:
        """What its tools read from ``ToolServices.domain`` (e.g. ``{"funds": FundsRepo(store)}``)."""
        ...

    def assistant(self, bara: "Bara") -> TurnAssistant | None:
        """The domain's own assistant (``agent`` mode) over ``bara``, or None when it has none."""
        ...

    def check_user(self, store: SqlRunner, user_id: str) -> None:
        """InputError when ``user_id`` has no account in the domain's data (its assistant would refuse)."""
        ...


def discover() -> list[Domain]:
    """Every installed domain plug-in, by name."""
    return [plugins.load_domain(target) for _, target in sorted(plugins.declared_domains().items())]


def tools_of(store: SqlRunner) -> dict[str, "Tool"]:
    """The tools of every domain whose data ``store`` holds."""
    found: dict[str, Tool] = {}
    for domain in discover():
        if domain.loaded(store):
            found.update(domain.tools())
    return found


def services_of(store: SqlRunner) -> dict[str, Any]:
    """Every domain's ``ToolServices.domain`` entries over ``store``."""
    found: dict[str, Any] = {}
    for domain in discover():
        found.update(domain.services(store))
    return found


def agent_domain() -> Domain:
    """The domain whose assistant answers ``agent`` mode: the first (by name) that has one."""
    for domain in discover():
        if domain.has_assistant:
            return domain
    raise InputError("agent mode needs a domain plug-in with its own assistant, and none is installed: "
                     "use mode gated or always")


def agent_assistant(bara: "Bara") -> TurnAssistant:
    """The ``agent`` mode assistant over ``bara``, from :func:`agent_domain`."""
    made = agent_domain().assistant(bara)
    if made is None:
        raise InputError("the installed domain has no assistant for agent mode: use mode gated or always")
    return made


def build_assistant(bara: Bara, mode: str, fallback_offline: bool = True) -> TurnAssistant:
    """The assistant of ``mode``: the gated pipeline or the always-retrieve baseline (over the model the
    settings name), or the domain plug-in's own assistant (``agent``: the tool-using portfolio agent)."""
    if mode == "agent":
        return agent_assistant(bara)
    return Assistant(bara, model=build_model(bara.settings), mode=pipeline_mode(mode),
                     fallback_offline=fallback_offline)
