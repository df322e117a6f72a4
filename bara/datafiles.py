"""Reading the data files a user hands to bara (datasets, chat scripts, AMFI exports): one way for all.

- a path that is missing, a folder, or not a regular file is an :class:`InputError` saying which;
- ``.gz`` files are decompressed, and a damaged or truncated one is an InputError, not a traceback;
- a UTF-8 byte-order mark (Windows editors and Excel write one) is dropped, so the first line or
  header is read like every other;
- bytes that are not UTF-8 become U+FFFD: a stray Latin-1 byte spoils one value, not the whole run;
- so does a lone surrogate that JSON escapes (``"\\ud800"``, which no UTF-8 store, hash or terminal can
  encode): :func:`json_value` decodes it as U+FFFD.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Mapping, Sized

from bara.errors import InputError
from bara.text.surrogates import json_without_surrogates

#: A JSON escape of a UTF-16 surrogate: a line without one (nearly all) is decoded as it is.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
#: What a damaged gzip stream raises while it is read (BadGzipFile is an OSError).
_GZIP_ERRORS = (OSError, EOFError, zlib.error)


def check_file(path: Path, what: str) -> Path:
    """``path`` if it is a regular file; else an InputError naming ``what`` and what the path is."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a folder: pass the {what} file itself, not the folder holding it")
    if not path.exists():
        raise InputError(f"{path} does not exist: pass the {what} file's path")
    if not path.is_file():
        raise InputError(f"{path} is not a regular file (a device, pipe or socket): pass the {what} file")
    return path


@contextmanager
def open_text(path: Path, what: str, newline: str | None = None) -> Iterator[IO[str]]:
    """The file as text (see the module docstring); errors while opening or reading are InputErrors."""
    path = check_file(path, what)
    gz = path.suffix == ".gz"
    try:
        fh = (gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline=newline) if gz
              else path.open(encoding="utf-8-sig", errors="replace", newline=newline))
    except OSError as exc:
        raise InputError(f"cannot read the {what} file {path} ({exc.strerror or exc}): make it readable") from exc
    try:
        with fh:
            yield fh
    except _GZIP_ERRORS as exc:
        if not gz:
            raise InputError(f"cannot read the {what} file {path} ({exc}): make it readable") from exc
        raise InputError(f"{path} is not a readable gzip file ({exc or type(exc).__name__}): pass a whole "
                         f".gz {what} file, or the uncompressed file without the .gz suffix") from exc


def read_lines(path: Path, what: str) -> Iterator[str]:
    """The file's lines (with their line ends), read as :func:`open_text` reads them."""
    with open_text(path, what) as fh:
        yield from fh


def require_some(items: Sized, path: Path, what: str, problems: Mapping[str, int]) -> None:
    """An InputError when a file gave nothing usable (a wrong or damaged file): an evaluation over
    zero items has no figures to report. Some unusable lines among usable ones are only counted."""
    if len(items):
        return
    seen = "; ".join(f"{reason}: {n}" for reason, n in problems.items())
    raise InputError(f"{path} holds no usable {what}" + (f" ({seen})" if seen else " (no lines)")
                     + f": pass a {what} file in the documented format")


def json_lines(lines: Iterable[str], where: str, fix: str) -> Iterator[tuple[int, Any]]:
    """(line number, :func:`json_value`) of each non-blank line; a line that is not JSON is an InputError
    naming ``where`` and its number, and saying ``fix``."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json_value(line)
        except ValueError as exc:
            raise InputError(f"{where} line {number} is not JSON ({exc}); {fix}") from exc


def json_value(text: str) -> Any:
    """``json.loads(text)`` with every lone surrogate in its strings (keys too) as U+FFFD; an escaped pair
    that makes one character (``"\\ud83d\\ude00"``) is that character. Raises what json.loads raises."""
    value = json.loads(text)
    return json_without_surrogates(value) if _SURROGATE_ESCAPE.search(text) else value
