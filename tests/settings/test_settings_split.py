"""bara.settings is a package (core.py holds the first sections); the split must not move a field."""

import ast
from pathlib import Path

from bara.settings import Settings, load_settings
from bara.settings.core import CoreSettings

SETTINGS_DIR = Path(__file__).resolve().parents[2] / "bara" / "settings"


def test_core_sections_come_first_in_the_dump_order():
    names = list(Settings().model_dump())
    core = list(CoreSettings.model_fields)
    assert names[:len(core)] == core
    assert names[:3] == ["db", "cache_dir", "data_dir"]
    assert core[-1] == "pg_ef_search" and names[len(core)] == "memory_episodic_k"
    assert names == list(load_settings(environ={}).model_dump())


def test_every_field_names_its_default_by_keyword():
    """``Field(default=...)``: a positional default is invisible to type checkers (bare ``Settings()``
    would read as missing every argument)."""
    positional = []
    for path in sorted(SETTINGS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Field" and node.args:
                positional.append(f"{path.name}:{node.lineno}")
    assert positional == []


def test_settings_stay_frozen_and_strict_after_the_split():
    s = Settings()
    assert Settings.model_config.get("frozen") is True and Settings.model_config.get("extra") == "forbid"
    assert s.override(k=s.k + 2).k == s.k + 2 and s.k == Settings.model_fields["k"].default
