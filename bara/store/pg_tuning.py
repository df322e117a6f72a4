"""Memory of the local server `bara db start` runs: ``shared_buffers`` sized to the machine, and pg_prewarm.

Why: a search on a large store reads up to ``pg_lexical_candidates`` candidate rows' heap pages and the
HNSW pages it walks. With PostgreSQL's default ``shared_buffers`` (128 MB) beside a multi-GB table
(10^6 chunks: heap 1.8 GB, HNSW 2.0 GB, GIN 0.3 GB) each new query's pages come from the OS page cache
(or the disk), and a restart empties the buffers (docs/benchmarks.md, "shared_buffers and pg_prewarm").

What: ``shared_buffers`` = ``pg_local_shared_buffers_mb``, or when 0, ``pg_local_ram_fraction`` of the
machine's memory (the cgroup limit if lower: PostgreSQL's own advice is 25 %), at most
``pg_local_shared_buffers_max_mb`` and at least PostgreSQL's default 128 MB; and ``pg_prewarm`` in
``shared_preload_libraries`` (``pg_local_prewarm``): its autoprewarm worker writes the list of buffered
blocks every 300 s and at shutdown, and reads them back in after a start. Both settings need a restart:
:func:`configure` applies a changed value with ``ALTER SYSTEM`` and one ``pg_ctl restart`` (which ends
the server's open connections), checks that the server reports it, and does nothing when nothing changed.
A server that will not start with the new values (not enough memory for them) is started again with its
previous configuration file, and the start is *degraded*: a note with the server's reason and what to
set, not an error, since the server runs as before.
After a start or restart with a saved block list it waits (``pg_local_prewarm_wait_s`` at most) until
the worker logs that it has loaded them, so the server it hands back is warm.

A server setting changes no query's result, only where its pages are read from. Shared memory is mapped
at start and its pages are touched on use: a small server with a large ``shared_buffers`` costs its
buffer descriptors (~2.4 % of the size) until it holds data.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bara.errors import StoreError

PG_DEFAULT_MB = 128
LIBRARY = "pg_prewarm"
_LOADED = re.compile(r"autoprewarm successfully prewarmed (\d+) of (\d+) previously-loaded blocks")


@dataclass(frozen=True)
class Tuning:
    """What `bara db start` sets on its server (from ``Settings``: :func:`tuning`)."""

    shared_buffers_mb: int
    prewarm: bool
    prewarm_wait_s: float = 60.0


def memory_mb() -> int:
    """This machine's memory in MiB, or its cgroup's limit when that is lower (a container)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total // 2**20


def shared_buffers_mb(settings: Any, ram_mb: int | None = None) -> int:
    """``pg_local_shared_buffers_mb``, or (0) the fraction of memory between 128 MB and the cap."""
    if settings.pg_local_shared_buffers_mb:
        return int(settings.pg_local_shared_buffers_mb)
    ram = memory_mb() if ram_mb is None else ram_mb
    auto = int(ram * settings.pg_local_ram_fraction)
    return max(PG_DEFAULT_MB, min(auto, int(settings.pg_local_shared_buffers_max_mb)))


def tuning(settings: Any) -> Tuning:
    return Tuning(shared_buffers_mb(settings), bool(settings.pg_local_prewarm), float(settings.pg_local_prewarm_wait_s))


def _libraries(value: str) -> list[str]:
    return [name.strip().strip('"') for name in value.split(",") if name.strip().strip('"')]


def _current(conn: Any) -> tuple[int, list[str]]:
    blocks, unit = conn.execute("SELECT setting::bigint, unit FROM pg_settings WHERE name = 'shared_buffers'").fetchone()
    size = int(unit[:-2]) if unit.endswith("kB") and unit[:-2].isdigit() else 8
    libs = conn.execute("SELECT current_setting('shared_preload_libraries')").fetchone()[0]
    return blocks * size // 1024, _libraries(libs)


def configure(url: str, path: Path, want: Tuning, started_at: int | None,
              pg_ctl: Callable[[str], object]) -> tuple[str, ...]:
    """Apply ``want`` to the server of ``path`` (superuser ``url``); what was done, one line each.

    ``started_at``: the log's size before the caller started the server (its autoprewarm worker is loading
    a saved block list), None when it was already running. ``pg_ctl(action)`` runs ``pg_ctl restart`` or
    ``start`` on ``path`` as the server's OS user, with the server's options (socket, no TCP) and log.
    """
    import psycopg
    from psycopg import sql

    log = path / "log"
    with psycopg.connect(url, autocommit=True) as conn:
        mb, libs = _current(conn)
        wanted = [x for x in libs if x != LIBRARY] + ([LIBRARY] if want.prewarm else [])
        changes = []
        if mb != want.shared_buffers_mb:
            changes.append(f"shared_buffers {mb} MB -> {want.shared_buffers_mb} MB")
        if wanted != libs:
            changes.append(f"shared_preload_libraries {','.join(libs) or '(none)'} -> {','.join(wanted) or '(none)'}")
        if not changes:
            notes = [f"memory: shared_buffers {mb} MB, pg_prewarm {'loaded' if LIBRARY in libs else 'off'} (unchanged)"]
            if started_at is not None and want.prewarm:
                notes.append(_await_prewarm(path, started_at, want.prewarm_wait_s))
            return tuple(notes)
        auto = path / "postgresql.auto.conf"
        before = auto.read_text()
        conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(f"{want.shared_buffers_mb}MB")))
        if wanted:
            conn.execute(sql.SQL("ALTER SYSTEM SET shared_preload_libraries = {}").format(sql.Literal(",".join(wanted))))
        else:  # SET ... = '' would write '""': a library named "" the server cannot start with
            conn.execute("ALTER SYSTEM RESET shared_preload_libraries")
    offset = log_size(log)
    try:
        pg_ctl("restart")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        auto.write_text(before)  # the previous settings back, so the server can start again as it was
        cause = _cause(_log_since(log, offset)) or str(exc)
        advice = "set BARA_PG_LOCAL_SHARED_BUFFERS_MB (or BARA_PG_LOCAL_PREWARM=false) and run `bara db start` again"
        try:
            pg_ctl("start")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            raise StoreError(f"PostgreSQL in {path} did not restart with {'; '.join(changes)} ({cause}), nor with "
                             f"its previous settings: see {log}; {advice}") from exc
        # Degraded, not failed: the server runs as it was, and says why the memory was not applied.
        return (f"memory: degraded: PostgreSQL did not start with {'; '.join(changes)} ({cause}); "
                f"it runs with its previous settings ({mb} MB); {advice}",)
    with psycopg.connect(url, autocommit=True) as conn:
        now = _current(conn)
    if now != (want.shared_buffers_mb, wanted):
        raise StoreError(f"PostgreSQL in {path} restarted but reports shared_buffers {now[0]} MB, "
                         f"shared_preload_libraries {now[1]} (wanted {want.shared_buffers_mb} MB, {wanted})")
    notes = [f"memory: restarted to apply {'; '.join(changes)}"]
    if want.prewarm:
        notes.append(_await_prewarm(path, offset, want.prewarm_wait_s))
    return tuple(notes)


def _cause(text: str) -> str:
    """The server's own reason in its log (its FATAL or first ERROR line), shortened."""
    lines = [ln for ln in text.splitlines() if "FATAL:" in ln or "ERROR:" in ln]
    return lines[0].split(":", 3)[-1].strip()[:300] if lines else ""


def _await_prewarm(path: Path, offset: int, wait_s: float) -> str:
    """Wait until the autoprewarm worker logs (after ``offset`` in the log) that its blocks are loaded."""
    if not (path / "autoprewarm.blocks").exists():
        return "prewarm: no saved buffer list yet (written every 300 s and at shutdown)"
    log, t0 = path / "log", time.monotonic()
    while True:
        found = _LOADED.search(_log_since(log, offset))
        waited = time.monotonic() - t0
        if found:
            return f"prewarm: loaded {found.group(1)} of {found.group(2)} saved blocks (waited {waited:.1f} s)"
        if waited >= wait_s:
            return f"prewarm: still loading after {wait_s:.0f} s (pg_local_prewarm_wait_s); it goes on in the background"
        time.sleep(0.2)


def log_size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def _log_since(log: Path, offset: int) -> str:
    return log.read_bytes()[offset:].decode(errors="replace") if log.exists() else ""
