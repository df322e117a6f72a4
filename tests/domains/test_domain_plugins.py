"""Domain plug-ins: the surfaces find the funds domain through ``bara.domain.discover`` (the
``bara.domains`` entry points and ``plugins.BUILTIN_DOMAINS``), and what it brings is what the domain
package itself builds."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bara import plugins
from bara.domain import agent_domain, discover, services_of, tools_of
from bara.errors import InputError
from bara.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]


def test_builtin_domains_match_the_declared_entry_points():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["bara.domains"] == plugins.BUILTIN_DOMAINS
    for target in plugins.BUILTIN_DOMAINS.values():
        assert plugins.load_domain(target) is not None


def test_funds_is_discovered_with_its_assistant_and_settings_section():
    from bara.domains.funds.plugin import DOMAIN
    from bara.settings import Settings

    assert [d.name for d in discover()] == ["funds"] and discover()[0] is DOMAIN and agent_domain() is DOMAIN
    section = list(DOMAIN.settings_model.model_fields)
    assert section and all(name.startswith(DOMAIN.settings_prefix) for name in section)
    assert not [f for f in Settings.model_fields if f.startswith(DOMAIN.settings_prefix)]  # core holds none
    folder = ROOT / "bara" / "domains" / "funds"
    derived = (folder / "settings.py").read_text().partition("\ndef ")[2]  # thin_score, past the fields
    source = "".join(p.read_text() for p in folder.rglob("*.py") if p.name != "settings.py") + derived
    assert all(name in source for name in section)  # settings the domain reads


def test_domain_tools_appear_only_once_the_data_is_loaded(tmp_path):
    from bara.domains.funds import build_fund_tools

    store = SQLiteStore(str(tmp_path / "empty.db"))
    try:
        assert tools_of(store) == {}  # no fund users: no fund tools
        assert set(services_of(store)) == {"funds"}
        with pytest.raises(InputError, match="no funds account"):
            agent_domain().check_user(store, "u_asha")
        store.execute("INSERT INTO funds_users (id, name, created) VALUES (?, ?, ?)", ("u_x", "X", "2026-01-01"))
        assert set(tools_of(store)) == set(build_fund_tools())
        agent_domain().check_user(store, "u_x")
    finally:
        store.close()
