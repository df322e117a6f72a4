"""Plug-in discovery (base layer): which packages add tables, migrations and row-level security to a store.

The store never imports the packages above it. Instead, before it assembles its migrations, it asks
this module to load every plug-in once; a plug-in is a ``register()`` function (named
``module:function``) that calls :func:`bara.store.registry.register_step` for the steps it owns.

Two sources, merged by name:

* the built-in plug-ins below (memory tiers + owner-keyed identity tables, the funds domain). They are
  listed here, as strings, so every ``open_store()`` (CLI, tests, serve, a bare ``SQLiteStore``) gets
  the same steps whether or not the installed package metadata is current (an editable install made
  before a plug-in was added has stale entry points);
* the entry-point group ``bara.plugins`` (``[project.entry-points."bara.plugins"]`` in pyproject.toml),
  read with :mod:`importlib.metadata`, so a separately installed package can add its own domain.
  pyproject declares the built-ins there too; tests/architecture/test_architecture.py checks both lists agree.

Order never depends on load order: every step carries its position (see :mod:`bara.store.registry`).
Strings are resolved with :func:`importlib.import_module` only when a store assembles its migrations,
so this module imports nothing from bara.
"""

from __future__ import annotations

import importlib
import threading
from importlib import metadata
from typing import Any, Callable

GROUP = "bara.plugins"

#: name -> "module:function"; the same pairs as pyproject's ``bara.plugins`` entry points.
BUILTIN: dict[str, str] = {
    "memory": "bara.memory.schema:register",
    "funds": "bara.domains.funds.schema:register",
}

#: Domain plug-ins (:class:`bara.domain.Domain` objects, named ``module:attribute``): the same pairs as
#: pyproject's ``bara.domains`` entry points. Surfaces find domains here, never by importing them.
DOMAIN_GROUP = "bara.domains"
BUILTIN_DOMAINS: dict[str, str] = {
    "funds": "bara.domains.funds.plugin:DOMAIN",
}

#: The function that builds a surface's assistant of a mode, ``(bara, mode, fallback_offline)``:
#: ``Bara.assistant`` sits below the assistants, so it names them here instead of importing them.
ASSISTANTS = "bara.domain:build_assistant"

_loaded: set[str] = set()
_lock = threading.RLock()  # two stores opened at once (serve workers' threads) load the plug-ins once


def declared() -> dict[str, str]:
    """Every plug-in: the built-ins, then installed entry points (an entry point may not rename a built-in)."""
    found = {ep.name: ep.value for ep in metadata.entry_points(group=GROUP)}
    return {**found, **BUILTIN}


def resolve(target: str) -> Callable[[], None] | None:
    """The ``register`` callable named by ``module:function``; None when its module is not installed
    (an optional domain left out of a deployment), as before the registry."""
    module, _, attr = target.partition(":")
    try:
        loaded = importlib.import_module(module)
    except ImportError:
        return None
    return getattr(loaded, attr or "register")


def load_all() -> None:
    """Run each plug-in's ``register()`` once per process (later calls are free)."""
    with _lock:
        for name, target in declared().items():
            if name in _loaded:
                continue
            register = resolve(target)
            if register is not None:
                register()
            _loaded.add(name)


def declared_domains() -> dict[str, str]:
    """Every domain plug-in: the built-ins, then installed entry points (which may not rename a built-in)."""
    found = {ep.name: ep.value for ep in metadata.entry_points(group=DOMAIN_GROUP)}
    return {**found, **BUILTIN_DOMAINS}


def load_domain(target: str) -> Any:
    """The domain object named by ``module:attribute`` (imported on first use)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr or "DOMAIN")


def load_object(target: str) -> Any:
    """The object named by ``module:attribute`` (imported on first use)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
