"""``BARA_*`` environment variables: which set a setting, and a warning for those that set nothing.

A misspelt variable (``BARA_KK=5``, ``BARA_GATE_KB_FLOR=0.3``) would otherwise be ignored in silence and
the user would believe the setting took effect. It is a warning, not an error, for the library and the
CLI alike: the environment is shared with other programs and other bara versions (a variable a newer
bara reads, a provider key named by ``llm_api_key_env``), and refusing to start over it would stop a
deployed ``bara serve`` on an upgrade. A settings *file* is ours alone: an unknown key there is an
error (``Settings`` forbids extra fields).
"""

from __future__ import annotations

import difflib
import warnings
from typing import Iterable, Mapping

PREFIX = "BARA_"

#: ``BARA_*`` variables that are not settings but are read on purpose (each by the code named).
NOT_SETTINGS = {
    "BARA_CONFIG": "the settings file (bara.settings.load_settings)",
    "BARA_DATABASE_URL": "the store URL when BARA_DB is unset (bara.settings)",
    "BARA_DATA": "the shared data folder of `bara funds load --data` (bara/cli/funds.py)",
    "BARA_SERVE_MODE": "how `bara serve` passes --mode to its workers (bara/serve/app.py)",
    "BARA_DEBUG": "an internal error of the CLI shows its traceback (bara/cli/__init__.py main)",
    "BARA_SLOW": "the test suite's long variants (tests/)",
    "BARA_ARTEFACTS": "the web timeline test's screenshots (tests/serve/test_web_timeline.py)",
    "BARA_WHEELHOUSE": "the wheels the installed-wheel test installs from (Makefile, tests/packaging/test_installed_wheel.py)",
    "BARA_CRASH_KILLS": "how many kill -9s the serve crash test makes (tests/faults/test_faults_crash_serve.py)",
}


class UnknownSettingWarning(UserWarning):
    """A ``BARA_*`` environment variable names no setting: it changes nothing."""


def env_values(environ: Mapping[str, str], fields: Iterable[str]) -> dict[str, str]:
    """The settings ``environ`` sets: ``BARA_<FIELD>`` for each field (``BARA_DATABASE_URL`` for ``db``
    when ``BARA_DB`` is unset)."""
    out = {}
    for name in fields:
        key = f"{PREFIX}{name.upper()}"
        if key in environ:
            out[name] = environ[key]
    if "BARA_DATABASE_URL" in environ and "db" not in out:
        out["db"] = environ["BARA_DATABASE_URL"]
    return out


def unknown_variables(environ: Mapping[str, str], fields: Iterable[str], also: Iterable[str] = ()) -> list[str]:
    """Messages for the ``BARA_*`` variables (any case) that set no setting, each naming the closest ones.
    ``also``: further names read on purpose (the variable ``llm_api_key_env`` names)."""
    known = {f"{PREFIX}{name.upper()}" for name in fields} | set(NOT_SETTINGS) | set(also)
    return [_message(key, known) for key in sorted(environ)
            if key.upper().startswith(PREFIX) and key not in known]


def warn_unknown(environ: Mapping[str, str], fields: Iterable[str], also: Iterable[str] = ()) -> None:
    """One :class:`UnknownSettingWarning` per unknown ``BARA_*`` variable (shown once per process)."""
    for message in unknown_variables(environ, fields, also):
        warnings.warn(message, UnknownSettingWarning, stacklevel=2)


def closest(wanted: str, names: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The ``names`` most like ``wanted`` (difflib), as spelt or with their words in any order:
    ``gate_kb_flor`` finds ``floor_kb``."""
    def score(name: str) -> float:
        return max(difflib.SequenceMatcher(None, wanted, name).ratio(),
                   difflib.SequenceMatcher(None, _words(wanted), _words(name)).ratio())
    scored = sorted(((score(name), name) for name in names), key=lambda p: (-p[0], p[1]))
    return [name for value, name in scored[:n] if value >= cutoff]


def _words(name: str) -> str:
    return " ".join(sorted(name.split("_")))


def _message(key: str, known: set[str]) -> str:
    wanted = key.upper()[len(PREFIX):].lower()  # BARA_DATABASE_URI finds BARA_DATABASE_URL, not only settings
    close = [f"{PREFIX}{s.upper()}" for s in closest(wanted, [k[len(PREFIX):].lower() for k in known])]
    hint = f"did you mean {' or '.join(close)}?" if close else \
        "no setting has a similar name; the settings are the fields of bara.settings.Settings"
    return f"environment variable {key} names no bara setting, so it changes nothing ({hint}): rename it " \
           "or unset it"
