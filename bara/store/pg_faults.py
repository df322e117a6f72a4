"""PostgreSQL faults in use as bara's typed store faults, naming the cause, never the URL.

A lost or refused connection (the server stopped or restarted) is ``store_unavailable``; every pooled
connection in use for ``pg_pool_timeout_s`` is ``store_busy`` (or ``store_unavailable`` when the server
cannot be reached at all); a full disk ``store_full``; a read-only server (a hot standby)
``store_read_only``. Other errors (constraints, bad SQL) pass through unchanged.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import psycopg
from psycopg import errors as pgerrors

from bara.errors import (StoreBusyError, StoreFaultError, StoreFullError, StoreReadOnlyError,
                         StoreUnavailableError)


def translate(exc: BaseException, reachable: Callable[[], bool]) -> StoreFaultError | None:
    """The store fault ``exc`` is, or None. ``reachable``: whether the server takes a new connection now."""
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout):
        if reachable():
            return StoreBusyError("every PostgreSQL connection of this process stayed in use past "
                                  "pg_pool_timeout_s: retry, or raise pg_pool_size")
        return _unreachable(exc)
    if isinstance(exc, pgerrors.DiskFull):
        return StoreFullError("the PostgreSQL server's disk is full; nothing of this write was stored")
    if isinstance(exc, pgerrors.ReadOnlySqlTransaction):
        return StoreReadOnlyError("the PostgreSQL server is read-only (a standby?); nothing was stored")
    if isinstance(exc, psycopg.Error) and (exc.sqlstate or "").startswith("40"):  # class 40, transaction rollback:
        # a deadlock (two writers' chunk_terms row locks, bara/store/pg_lexical.py) or a serialization failure
        return StoreBusyError(f"the PostgreSQL server rolled this transaction back ({type(exc).__name__}: it "
                              "conflicted with a concurrent write); nothing of it was stored: retry")
    if isinstance(exc, (pgerrors.AdminShutdown, pgerrors.CannotConnectNow, pgerrors.CrashShutdown)):
        return _unreachable(exc)
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) and not isinstance(
            exc, pgerrors.QueryCanceled):
        return _unreachable(exc)
    return None


def _unreachable(exc: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(f"the PostgreSQL server cannot be reached or lost the connection "
                                 f"({type(exc).__name__}); nothing of this request was stored. Retry once it is back")


@contextmanager
def translated(reachable: Callable[[], bool]) -> Iterator[None]:
    try:
        yield
    except StoreFaultError:
        raise
    except Exception as exc:
        fault = translate(exc, reachable)
        if fault is None:
            raise
        raise fault from exc


def quiet_rollback(conn: psycopg.Connection) -> None:
    """ROLLBACK, unless the connection is gone (then the server rolled back already)."""
    try:
        conn.execute("ROLLBACK")
    except (psycopg.OperationalError, psycopg.InterfaceError):
        pass
