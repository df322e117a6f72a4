"""Settings: defaults < TOML < environment < per-call overrides; bad values are clear errors."""

from __future__ import annotations

import pytest

from bara.errors import ConfigError
from bara.settings import Settings, load_settings


def test_defaults_document_every_field():
    s = load_settings(environ={})
    assert s == Settings()  # no file and no environment: the fields' own defaults
    # the fusion's defaults: RRF's k = 60 of Cormack et al. (2009), both arms weighted alike, more candidates
    # fetched than answered with
    assert s.rrf_k == 60 and s.weight_lexical == s.weight_dense and s.candidate_multiplier > 1
    # route floors are calibrated per embedder (bench_rewrite --floors); re-asked Q&A stays strict
    assert all(-1.0 <= f < s.floor_qa for f in (s.floor_kb, s.floor_continuation, s.floor_general))
    undocumented = [name for name, f in Settings.model_fields.items() if not f.description]
    assert undocumented == []


def test_toml_then_env_then_call(tmp_path):
    toml = tmp_path / "bara.toml"
    toml.write_text("[bara]\nk = 7\nrrf_k = 30\nfloor_kb = 0.4\n")
    s = load_settings(toml, environ={"BARA_RRF_K": "10"}, floor_kb=0.5)
    assert (s.k, s.rrf_k, s.floor_kb) == (7, 10, 0.5)
    assert load_settings(environ={"BARA_CONFIG": str(toml)}).k == 7


def test_override_returns_a_validated_copy():
    s = load_settings(environ={})
    t = s.override(k=s.k + 5)
    assert (s.k, t.k) == (Settings().k, Settings().k + 5) and t.rrf_k == s.rrf_k
    with pytest.raises(ConfigError, match="k"):
        s.override(k=0)
    with pytest.raises(ConfigError, match="no_such_setting"):
        s.override(no_such_setting=1)


@pytest.mark.parametrize("content, match", [("k = 'many'", "k"), ("[bara\n", "not valid TOML"),
                                            ("candidate_multiplier = -1", "candidate_multiplier")])
def test_bad_toml_names_the_problem(tmp_path, content, match):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=match):
        load_settings(path, environ={})


def test_missing_file_and_bad_env_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", environ={})
    with pytest.raises(ConfigError, match="k"):
        load_settings(environ={"BARA_K": "lots"})


def test_database_url_env_sets_db():
    assert load_settings(environ={"BARA_DATABASE_URL": "postgresql://x/y"}).db == "postgresql://x/y"


def test_a_bara_toml_in_the_working_folder_is_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_settings(environ={}).k == Settings().k != 7
    (tmp_path / "bara.toml").write_text("[bara]\nk = 7\n")
    assert load_settings(environ={}).k == 7
    assert load_settings(environ={"BARA_K": "5"}).k == 5


def test_the_suite_starts_each_test_clean():
    """The autouse fixture: no developer BARA_* setting and no ./bara.toml reach a test."""
    import os
    from pathlib import Path

    from conftest import SUITE_VARIABLES

    assert [k for k in os.environ if k.upper().startswith("BARA_") and k not in SUITE_VARIABLES] == []
    assert not Path("bara.toml").exists() and list(Path.cwd().iterdir()) == []
