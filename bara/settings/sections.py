"""Domain plug-ins' own settings sections (``Settings.domains``): which exist, and the flat keys they take.

A domain plug-in (:class:`bara.domain.Domain`) brings a pydantic model of its settings
(``settings_model``) whose fields share its ``settings_prefix`` (funds: ``router_``). Its values sit
under ``Settings.domains[<domain name>]``; a flat key with the prefix (``router_sim_min`` in
``bara.toml``, ``BARA_ROUTER_SIM_MIN`` in the environment, ``Settings(router_sim_min=...)``) is moved
there before validation, so the names users set before the domain owned its section still work, and
``Settings.model_dump()`` shows every section's values flat, as those names.

Sections are found through :mod:`bara.plugins` (as the surfaces find domains), only when a flat key or
a section is given or shown, so building ``Settings()`` at import time never loads a domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Iterable, Mapping, TypeVar

from pydantic import BaseModel, ValidationError

from bara import plugins

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Section:
    domain: str
    prefix: str
    model: type[BaseModel]


@cache
def sections() -> tuple[Section, ...]:
    """The settings section of every installed domain plug-in that has one, by domain name."""
    found = []
    for _, target in sorted(plugins.declared_domains().items()):
        try:
            domain = plugins.load_domain(target)
        except ImportError:  # a domain left out of a deployment, as bara.plugins.resolve skips it
            continue
        model = getattr(domain, "settings_model", None)
        if model is not None:
            found.append(Section(domain.name, domain.settings_prefix, model))
    return tuple(found)


def section_fields() -> list[str]:
    """The flat names of every section's settings (``BARA_<NAME>`` sets one)."""
    return [name for s in sections() for name in s.model.model_fields]


def gather(data: Any, core: Iterable[str]) -> Any:
    """``data`` (the values given to ``Settings``) with every flat key of a domain section moved into
    ``domains[<domain>]`` and each section checked by its model (ValueError naming the section)."""
    if not isinstance(data, Mapping):
        return data
    known = set(core)
    flat = [k for k in data if k not in known]
    given = data.get("domains") or {}
    if not flat and not given:
        return data
    if not isinstance(given, Mapping):
        raise ValueError(f"domains must be a table of domain settings sections, not {type(given).__name__}")
    out = {k: v for k, v in data.items() if k not in flat}
    domains = {name: dict(values) if isinstance(values, Mapping) else values for name, values in given.items()}
    for key in flat:
        owner = next((s for s in sections() if key.startswith(s.prefix) and key in s.model.model_fields), None)
        if owner is None:
            out[key] = data[key]  # not a domain's: Settings refuses it as an unknown setting
            continue
        domains.setdefault(owner.domain, {})[key] = data[key]
    out["domains"] = {name: _checked(name, values) for name, values in domains.items()}
    return out


def _checked(name: str, values: Any) -> dict[str, Any]:
    owner = next((s for s in sections() if s.domain == name), None)
    if owner is None:
        raise ValueError(f"domains.{name}: no installed domain plug-in has this settings section (known: "
                         f"{', '.join(s.domain for s in sections()) or 'none'})")
    if not isinstance(values, Mapping):
        raise ValueError(f"domains.{name} must be a table of settings, not {type(values).__name__}")
    try:
        checked = owner.model.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"domains.{name}: {problems}") from None
    return checked.model_dump(include=set(values))


def section_of(domains: Mapping[str, Mapping[str, Any]], name: str, model: type[M]) -> M:
    """Section ``name`` of ``domains`` as ``model``; built once per distinct set of values (settings are
    frozen, and a cache on the Settings object itself would make equal settings compare unequal)."""
    values = domains.get(name, {})
    key = tuple(sorted(values.items()))
    try:
        hash(key)
    except TypeError:  # a list or table value: validate it each time
        return model.model_validate(values)
    return _section(model, key)


@lru_cache(maxsize=256)
def _section(model: type[M], items: tuple[tuple[str, Any], ...]) -> M:
    return model.model_validate(dict(items))


def flat_values(domains: Mapping[str, Mapping[str, Any]], mode: str) -> dict[str, Any]:
    """Every section's values (defaults included) as flat keys, for ``Settings.model_dump``."""
    out: dict[str, Any] = {}
    for s in sections():
        out.update(s.model.model_validate(domains.get(s.domain, {})).model_dump(mode=mode))
    return out
