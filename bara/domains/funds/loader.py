"""Load AMFI scheme master and NAV history into the funds tables.

Sources (AMFI India, https://www.amfiindia.com/): ``schemes.csv`` is the
scheme master (code, ISINs, name, SEBI category, fund house);
``nav_history.csv.gz`` holds daily NAVs of Direct-plan Growth schemes.
AMFI publishes ``0.0000`` for days a scheme had no valid NAV (e.g. segregated
portfolios); those rows are skipped and counted, never stored.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Collection, Sequence

from bara.datafiles import open_text
from bara.errors import InputError

SCHEMES_FILE = "schemes.csv"
NAVS_FILE = "nav_history.csv.gz"
SCHEME_COLUMNS = ("scheme_code", "isin_growth", "isin_reinvest", "scheme_name", "category", "fund_house")
NAV_COLUMNS = ("date", "scheme_code", "nav")
_ISIN_MISSING = ("", "-")

_UPSERT_SCHEME = (
    "INSERT INTO funds_schemes (scheme_code, isin_growth, isin_reinvest, name, category, fund_house)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scheme_code) DO UPDATE SET"
    " isin_growth = excluded.isin_growth, isin_reinvest = excluded.isin_reinvest,"
    " name = excluded.name, category = excluded.category, fund_house = excluded.fund_house")
_INSERT_NAV = "INSERT INTO funds_navs (scheme_code, date, nav) VALUES (?, ?, ?)"


@dataclass(frozen=True)
class LoadReport:
    """What one load stored; ``skipped_navs`` counts rows with a zero, negative or unreadable NAV (or too
    few columns), ``skipped_schemes`` scheme rows with too few columns."""

    schemes: int
    navs: int
    nav_schemes: int
    skipped_navs: int
    first_date: str | None
    last_date: str | None
    seconds: float
    skipped_schemes: int = 0


def amfi_dir(data_dir: str | Path) -> Path:
    """The folder holding the AMFI files: ``data_dir`` itself or its ``amfi/`` child."""
    base = Path(data_dir).expanduser()
    return base if (base / SCHEMES_FILE).exists() else base / "amfi"


def load_amfi(runner: Any, data_dir: str | Path, only_codes: Collection[str] | None = None) -> LoadReport:
    """Replace schemes (upsert, so transactions keep their references) and all NAVs.

    ``only_codes`` restricts the NAVs stored (every scheme is always loaded);
    useful for fast tests. Runs in one transaction: a failed load leaves the
    previous data in place.
    """
    started = time.perf_counter()
    folder = amfi_dir(data_dir)
    schemes_path, navs_path = _require(folder / SCHEMES_FILE), _require(folder / NAVS_FILE)
    schemes, skipped_schemes = _read_schemes(schemes_path)
    navs, skipped = _read_navs(navs_path, {s[0] for s in schemes}, only_codes)
    with runner.transaction():
        runner.executemany(_UPSERT_SCHEME, schemes)
        runner.execute("DELETE FROM funds_navs")
        runner.executemany(_INSERT_NAV, navs)
    dates = [n[1] for n in navs]
    return LoadReport(len(schemes), len(navs), len({n[0] for n in navs}), skipped,
                      min(dates, default=None), max(dates, default=None),
                      round(time.perf_counter() - started, 3), skipped_schemes)


def _require(path: Path) -> Path:
    if not path.is_file():
        raise InputError(f"AMFI data file not found: {path}. Whoever runs the load must pass the folder "
                         f"holding {SCHEMES_FILE} and {NAVS_FILE} (or its parent with an amfi/ folder).")
    return path


def _check_header(path: Path, found: Sequence[str] | None, wanted: tuple[str, ...]) -> None:
    missing = [c for c in wanted if c not in (found or [])]
    if missing:
        raise InputError(f"{path} lacks the columns {', '.join(missing)} (has: {', '.join(found or [])}). "
                         "Replace it with an AMFI export in the documented layout.")


def _read_schemes(path: Path) -> tuple[list[tuple[str, str, str, str, str, str]], int]:
    """Scheme rows with a code, and how many rows were too short to read."""
    rows, skipped = [], 0
    with open_text(path, "AMFI schemes", newline="") as fh:
        reader = csv.DictReader(fh)
        _check_header(path, reader.fieldnames, SCHEME_COLUMNS)
        for row in reader:
            if any(row[c] is None for c in SCHEME_COLUMNS):  # a cut-off line: fewer fields than the header
                skipped += 1
                continue
            code = row["scheme_code"].strip()
            if code:
                rows.append((code, _isin(row["isin_growth"]), _isin(row["isin_reinvest"]),
                             row["scheme_name"].strip(), row["category"].strip(), row["fund_house"].strip()))
    return rows, skipped


def _isin(value: str | None) -> str:
    value = (value or "").strip()
    return "" if value in _ISIN_MISSING else value


def _read_navs(path: Path, known: set[str], only: Collection[str] | None
               ) -> tuple[list[tuple[str, str, float]], int]:
    """Storable NAV rows sorted by (scheme, date), the primary-key order that inserts fastest."""
    keep = set(only) if only is not None else None
    rows: list[tuple[str, str, float]] = []
    skipped = 0
    with open_text(path, "AMFI NAV history", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        _check_header(path, header, NAV_COLUMNS)
        at = [header.index(c) for c in NAV_COLUMNS]  # type: ignore[union-attr]
        for record in reader:
            if len(record) <= max(at):  # a cut-off line
                skipped += 1
                continue
            day, code, nav = (record[i].strip() for i in at)
            if keep is not None and code not in keep:
                continue
            parsed = _nav_row(code, day, nav, known)
            skipped += parsed is None
            if parsed is not None:
                rows.append(parsed)
    rows.sort()
    return rows, skipped


def _nav_row(code: str, day: str, nav: str, known: set[str]) -> tuple[str, str, float] | None:
    """A storable ``(code, iso_date, nav)``, or None for unknown schemes and unusable values."""
    try:
        value = float(nav)
        iso = date.fromisoformat(day).isoformat()
    except ValueError:
        return None
    if code not in known or not value > 0 or value == float("inf"):
        return None
    return code, iso, value
