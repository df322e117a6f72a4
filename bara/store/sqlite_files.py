"""Opening the SQLite store's file: create or refuse it, and the clear errors for a read-only, damaged or
foreign file (what to change is in each message)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from bara.errors import StoreError, StoreFullError, StoreReadOnlyError, StoreUnavailableError
from bara.store.sqlite_conns import busy

APPLICATION_ID = 0x62617261  # "bara": marks the file as ours
DEFAULT_BUSY_TIMEOUT_S = 30.0  # Settings.store_busy_timeout_s


def exists(location: str) -> bool:
    """Whether the store file is there; a folder is refused (StoreError), whatever the command."""
    if location != ":memory:" and Path(location).expanduser().is_dir():
        raise StoreError(f"{location} is a folder, not a store file: pass --db with a file path, e.g. "
                         f"{Path(location) / 'bara.db'}")
    return location == ":memory:" or Path(location).expanduser().is_file()


def connect_file(location: str, mode: str, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S
                 ) -> tuple[sqlite3.Connection, bool]:
    """The connection and whether it is read-only (a read-only file opened by a reader). A statement
    waits up to ``busy_timeout_s`` for another connection's write lock, then fails as busy."""
    if location == ":memory:":
        return _open(location, location, False, busy_timeout_s), False
    path = Path(location).expanduser()
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder for the store {location}: {exc}. "
                             "Pass --db with a writable path.") from exc
    elif not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        if mode != "read":
            raise _read_only(location)
        return _open(reader_uri(location) or location, location, True, busy_timeout_s), True
    return _open(str(path), location, False, busy_timeout_s), False


def reader_uri(location: str) -> str | None:
    """The URI of the store's read connections (``bara.store.sqlite_conns``, the full-text worker's); None for
    ``:memory:``. On a read-only file system SQLite cannot create the WAL's ``-shm`` file a ``mode=ro`` reader
    needs (it failed as "unable to open database file", read as corrupt); nothing can change
    the file there, so it is opened ``immutable=1`` (no locks, no shared memory)."""
    if location == ":memory:":
        return None
    path = Path(location).expanduser().resolve()
    return f"{path.as_uri()}?mode=ro" + ("&immutable=1" if read_only_file_system(path) else "")


def read_only_file_system(path: Path) -> bool:
    """Whether ``path``'s file system is mounted read-only."""
    try:
        return bool(os.statvfs(path if path.exists() else path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _open(target: str, location: str, read_only: bool, busy_timeout_s: float) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s,
                               uri=read_only)
        conn.execute("PRAGMA foreign_keys = ON")
        if not read_only:
            conn.execute("PRAGMA journal_mode = WAL") if location != ":memory:" else None
            conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        raise file_problem(exc, location) or StoreError(
            f"{location} is not a usable SQLite database ({exc}). It may be corrupt or another "
            "program's file: move it aside or pass --db with a new path.") from exc
    return conn


def _read_only(location: str) -> StoreError:
    where = " (its file system is mounted read-only)" if read_only_file_system(Path(location).expanduser()) else ""
    return StoreError(f"{location} is read-only{where}: read commands (search, memory inspect, funds users) work on it, "
                      "but bara cannot write into it. Make the file and its folder writable (chmod u+w) "
                      "or pass --db with another path.")


def _corrupt(location: str, detail: object) -> StoreError:
    return StoreError(f"{location} is damaged ({detail}): bara will neither read nor write it. Restore it "
                      "from a backup, or move it aside and rebuild it with `bara ingest PATH --db NEW_PATH`.")


def file_problem(exc: sqlite3.DatabaseError, location: str) -> StoreError | None:
    """A StoreError for a damaged, read-only or busy file; None for other errors (constraints...)."""
    text = str(exc).lower()
    if "readonly" in text or "read-only" in text:
        return StoreReadOnlyError(str(_read_only(location)))
    if "database is locked" in text or "database is busy" in text:
        return busy(location)
    if "disk is full" in text or "database is full" in text:
        return StoreFullError(f"{location}: the disk is full ({exc}); nothing of this write was stored. Free "
                              "space on its file system, then retry.")
    if "disk i/o error" in text or ("unable to open database file" in text and Path(location).is_file()):
        return StoreUnavailableError(f"{location} cannot be read or written now ({exc}): an I/O error of its "
                                     "disk or file system; nothing of this write was stored. Retry, and check "
                                     "the disk if it persists.")
    if "not a database" in text and not _sqlite_header(location):
        return StoreError(f"{location} is not a SQLite database (another program's file?): bara will neither read "
                          "nor write it. Pass --db with the path of a bara store, or a new path to create one.")
    if any(sign in text for sign in ("malformed", "not a database", "corrupt", "encrypted",
                                     "vtable constructor failed")):  # a damaged full-text shadow table
        return _corrupt(location, exc)
    return None


def _sqlite_header(location: str) -> bool:
    """Whether the file starts as every SQLite database does (a damaged store still does, mostly)."""
    try:
        with open(Path(location).expanduser(), "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return True  # cannot tell: keep the damaged-store message


def check_integrity(conn: sqlite3.Connection, location: str, was_clean: bool = False) -> bool:
    """Writers refuse a damaged file: ``quick_check`` reads every page once (time linear in the
    file size: minutes for a 5 GB store; docs/benchmarks.md) but skips the index cross-checks of
    ``integrity_check``. It is skipped when ``was_clean`` (:func:`closed_clean`, read before the
    file was opened: the file is exactly as a writer that passed the check left it at a clean close).
    Whether it ran is returned. The mark is removed before this writer changes anything, so a crash
    leaves none."""
    try:
        clean_mark(location).unlink(missing_ok=True)
    except OSError:
        pass  # a read-only folder: nothing here will write the file either
    if was_clean:
        return False
    rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    if rows != [("ok",)]:
        raise _corrupt(location, rows[0][0] if rows else "quick_check returned nothing")
    return True


def closed_clean(location: str) -> bool:
    """Whether the file and its WAL are as the last writer's clean close recorded them (size and
    nanosecond modification time; :func:`mark_clean`). Read before connecting: opening creates the WAL."""
    return location != ":memory:" and _read_mark(clean_mark(location)) == file_stamp(location)


def clean_mark(location: str) -> Path:
    """``<db>.clean``: the stamp of a file its last writer closed cleanly."""
    return Path(str(Path(location).expanduser()) + ".clean")


def file_stamp(location: str) -> list[int]:
    """Size and nanosecond modification time of the file and of its WAL (-1, -1 when there is none, or
    when it is empty: a WAL without a frame changes nothing the file holds, and a read-only connection
    (a ``mode=ro`` reader, ``sqlite3 -readonly``, a backup tool) leaves an empty one behind where a clean
    close had removed it; counting it would make the next writer read every page for nothing)."""
    out: list[int] = []
    for k, path in enumerate((Path(location).expanduser(), Path(str(Path(location).expanduser()) + "-wal"))):
        try:
            st = path.stat()
        except FileNotFoundError:
            out += [-1, -1]
            continue
        out += [-1, -1] if k == 1 and st.st_size == 0 else [st.st_size, st.st_mtime_ns]
    return out


def mark_clean(location: str) -> None:
    """Record the file's stamp after a clean close, so the next writer may skip ``quick_check``. A
    mark that cannot be written only means the next open checks again."""
    mark = clean_mark(location)
    tmp = mark.with_name(mark.name + ".tmp")
    try:
        tmp.write_text(" ".join(map(str, file_stamp(location))))
        tmp.replace(mark)
    except OSError:
        tmp.unlink(missing_ok=True)


def _read_mark(mark: Path) -> list[int] | None:
    try:
        return [int(x) for x in mark.read_text().split()]
    except (OSError, ValueError):
        return None


def check_identity(conn: sqlite3.Connection, location: str) -> None:
    """Refuse foreign databases: non-empty files that are not marked as bara's."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{location} is not a bara database (corrupt or not SQLite: {exc}). "
                         "Move it aside or pass --db with a new path.") from exc
    if tables and app_id != APPLICATION_ID:
        raise StoreError(f"{location} is an SQLite database of another program (application_id={app_id}). "
                         "bara will not write into it: pass --db with a new path.")
