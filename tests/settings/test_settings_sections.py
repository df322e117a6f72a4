"""A domain plug-in's settings are its own section (``Settings.domains``), and every name a user set
them by before still works: flat keys in bara.toml, ``BARA_ROUTER_*`` variables, ``Settings(router_...)``;
the section shows flat in ``model_dump`` with the same values."""

from __future__ import annotations

import warnings

import pytest

from bara.domains.funds.settings import FundsSettings, funds_settings, thin_score
from bara.errors import ConfigError
from bara.settings import Settings, UnknownSettingWarning, load_settings


def test_the_router_settings_are_the_funds_section_not_core_fields():
    assert not [name for name in Settings.model_fields if name.startswith("router_")]
    s = Settings()
    assert funds_settings(s) == FundsSettings() and s.domains == {}
    dumped = s.model_dump()
    assert "domains" not in dumped
    assert {k: dumped[k] for k in FundsSettings.model_fields} == FundsSettings().model_dump()


def test_flat_names_load_into_the_section(tmp_path):
    assert funds_settings(Settings(router_sim_min=0.45)).router_sim_min == 0.45
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownSettingWarning)  # a known name: no warning
        from_env = load_settings(environ={"BARA_ROUTER_THIN_MIN_HITS": "3"})
    assert funds_settings(from_env).router_thin_min_hits == 3
    flat = tmp_path / "flat.toml"
    flat.write_text("router_keyword_score = 80.0\n")
    assert funds_settings(load_settings(flat, environ={})).router_keyword_score == 80.0
    table = tmp_path / "table.toml"
    table.write_text("[bara.domains.funds]\nrouter_sim_floor = 0.25\n")
    assert funds_settings(load_settings(table, environ={})).router_sim_floor == 0.25


def test_a_section_value_survives_override_and_shows_flat():
    s = Settings(router_thin_rank=20.0).override(k=7)
    assert funds_settings(s).router_thin_rank == 20.0 and s.k == 7
    assert s.model_dump()["router_thin_rank"] == 20.0
    assert thin_score(s) == (s.weight_lexical + s.weight_dense) / (s.rrf_k + 20.0)


def test_a_bad_section_value_or_unknown_name_is_refused():
    with pytest.raises(ConfigError, match="router_sim_min"):
        load_settings(environ={"BARA_ROUTER_SIM_MIN": "5"})
    with pytest.raises(ValueError, match="router_sim_mn"):
        Settings(router_sim_mn=0.4)
    with pytest.raises(ValueError, match="no installed domain plug-in"):
        Settings(domains={"nope": {}})
    with pytest.warns(UnknownSettingWarning, match="BARA_ROUTER_SIM_MIN"):
        load_settings(environ={"BARA_ROUTER_SIM_MN": "0.4"})
