"""A BARA_* environment variable that names no setting is a warning naming the closest ones, never silence
and never a failure; every BARA_* name the code reads on purpose is known."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from bara.settings import Settings, UnknownSettingWarning, load_settings
from bara.settings.environment import NOT_SETTINGS
from bara.settings.sections import section_fields

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {f"BARA_{name.upper()}" for name in [*Settings.model_fields, *section_fields()]}  # domains' too


def _warned(environ: dict[str, str]) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_settings(environ=environ)
    return [str(w.message) for w in caught if issubclass(w.category, UnknownSettingWarning)]


@pytest.mark.parametrize("typo,meant", [("BARA_KK", "BARA_K"), ("BARA_GATE_KB_FLOR", "BARA_FLOOR_KB"),
                                        ("BARA_EMBEDER", "BARA_EMBEDDER"), ("bara_k", "BARA_K"),
                                        ("BARA_DATABASE_URI", "BARA_DATABASE_URL")])
def test_a_misspelt_variable_is_named_with_the_closest_settings(typo, meant):
    messages = _warned({typo: "5"})
    assert len(messages) == 1 and typo in messages[0] and meant in messages[0]
    assert "changes nothing" in messages[0] and "rename it or unset it" in messages[0]
    named = set(re.findall(r"BARA_[A-Z0-9_]+", messages[0])) - {typo}
    assert named and named <= SETTINGS | set(NOT_SETTINGS)  # suggests only names bara reads


def test_a_name_like_no_setting_still_says_what_to_do():
    (message,) = _warned({"BARA_XYZZYQ": "1"})
    assert "no setting has a similar name" in message and "rename it or unset it" in message


def test_the_value_is_still_loaded_and_nothing_fails():
    with pytest.warns(UnknownSettingWarning):
        settings = load_settings(environ={"BARA_KK": "5", "BARA_K": "7"})
    assert settings.k == 7


def test_known_names_warn_nothing():
    environ = {name: "1" for name in NOT_SETTINGS} | {"BARA_DATABASE_URL": "/tmp/x.db", "BARA_CONFIG": "",
                                                      "BARA_K": "5", "BARA_MY_PROVIDER_KEY": "sk-x",
                                                      "BARA_LLM_API_KEY_ENV": "BARA_MY_PROVIDER_KEY",
                                                      "OTHER_TOOL_K": "1"}
    environ.pop("BARA_CONFIG")
    assert _warned(environ) == []


def test_every_bara_variable_the_code_reads_is_a_setting_or_allowed():
    """A new BARA_* name read anywhere must be a setting or listed in NOT_SETTINGS (else it would warn)."""
    files = [p for d in ("bara", "tests", "scripts", "bench", "eval", "docs") for p in (ROOT / d).rglob("*")
             if p.suffix in (".py", ".sh", ".toml", ".md") and p.is_file()] + [*ROOT.glob("*.md"), ROOT / "Makefile"]
    found = {m for p in files for m in re.findall(r"\bBARA_[A-Z0-9_]*[A-Z0-9]\b", p.read_text(errors="replace"))}
    found -= {"BARA_TEST_PROVIDER_KEY", "BARA_MY_PROVIDER_KEY"}  # named through llm_api_key_env
    found -= {"BARA_KK", "BARA_GATE_KB_FLOR", "BARA_EMBEDER", "BARA_DATABASE_URI", "BARA_XYZZYQ",
              "BARA_ROUTER_SIM_MN"}  # typos above and in test_settings_sections.py
    assert sorted(found - SETTINGS - set(NOT_SETTINGS)) == []


def test_the_cli_prints_one_warning_line_and_goes_on(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BARA_KK": "5", "BARA_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "bara.cli", "memory", "forget", "--user", "u",
                           "--db", str(tmp_path / "none.db")], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no store at" in proc.stderr  # the command ran as without the variable
    lines = [line for line in proc.stderr.splitlines() if "BARA_KK" in line]
    assert lines == ["warning: environment variable BARA_KK names no bara setting, so it changes nothing (did you "
                     "mean BARA_K?): rename it or unset it"]
