"""The shared scopes' lexicons a process searches (``sqlite_bm25``): when each is built, on what thread,
and, for a scope of at least ``lexical_topk_min_chunks``, its compact persisted form
(``sqlite_lexicon_file``) searched by MaxScore (``lexical_topk``)."""

from __future__ import annotations

import sqlite3
import threading
import warnings
from contextlib import closing
from typing import Callable, Sequence

import numpy as np

from bara.store import sqlite_lexicon_file
from bara.store.sqlite_bm25 import PLAIN, Lexicon, build_lexicon
from bara.store.sqlite_lexical import LEXICAL_SQL, Run, lexical_params, lexical_rows, read_snapshot, runner
from bara.types import SearchRequest

#: ``Settings.lexical_topk_min_chunks``'s default, for a bare ``SQLiteStore``.
DEFAULT_TOPK_MIN = 50_000
PROBE_ROWS = 20_000  # above every default evaluation's size: their probes are as before


class Lexicons:
    """The lexicons of the shared scopes this process searches. A scope's lexicon is built on a
    background thread with its own read-only connection, started once the scope has been searched
    ``after`` times (``lexical_in_memory_after_searches``: a short script never pays the ~0.1 s of CPU
    for 1,152 chunks, ~0.4 s for 5,000-8,000) and again after a write to the scope; FTS5 answers until
    it is ready. Memory scopes are not built here: they change every turn, live in their own table
    (``memory_fts``), which this lexicon's statistics do not read, and are scored over their own
    statistics (``bara.store.sqlite_scope_bm25``, which extends them at each append). ``uri`` None
    (an in-memory database, which a second connection cannot open): never built."""

    def __init__(self, shared: str, uri: str | None, location: str | None = None, topk_min: int = DEFAULT_TOPK_MIN):
        self.shared, self.uri = shared, uri
        self.location, self.topk_min = location, topk_min  # the file beside which large lexicons persist
        self._built: dict[tuple, tuple[tuple[int, ...], Lexicon | None]] = {}
        self._searches: dict[tuple, int] = {}
        self._building: dict[tuple, threading.Thread] = {}
        self._lock = threading.Lock()
        self._closed = False

    def current(self, owners: tuple[str, ...], colls: tuple[str, ...], gens: tuple[int, ...]) -> Lexicon | None:
        """The scope's lexicon if it is built and as of ``gens``, else None."""
        built = self._built.get((owners, colls))
        return built[1] if built is not None and built[0] == gens else None

    def lexicon(self, owners: tuple[str, ...], colls: tuple[str, ...], gens: tuple[int, ...],
                generations: Callable[[Run], tuple[int, ...]], after: int) -> Lexicon | None:
        """The scope's lexicon as of ``gens``; None (FTS5 answers) for memory scopes, before the scope's
        ``after``-th search, while it is being built and when the build found FTS5's counts differ or the
        probe (:func:`agrees_with_fts5`) ranked otherwise. ``generations`` reads the scope's write
        generations on the builder's connection."""
        if any(o != self.shared for o in owners):
            return None
        key = (owners, colls)
        built = self._built.get(key)
        if built is not None and built[0] == gens:
            return built[1]
        self._searches[key] = self._searches.get(key, 0) + 1
        if self._searches[key] >= after:
            self._start(key, generations)
        return None

    def _start(self, key: tuple, generations: Callable[[Run], tuple[int, ...]]) -> None:
        with self._lock:
            running = self._building.get(key)
            if self.uri is None or self._closed or (running is not None and running.is_alive()):
                return
            thread = threading.Thread(target=self._build, args=(key, generations), name="bara-lexicon", daemon=True)
            self._building[key] = thread
            thread.start()

    def _build(self, key: tuple, generations: Callable[[Run], tuple[int, ...]]) -> None:
        owners, colls = key
        assert self.uri is not None  # _start checked
        with closing(sqlite3.connect(self.uri, uri=True, check_same_thread=False, timeout=30.0)) as conn:
            run = runner(conn)
            try:
                # The generations, rows and probe as of one moment: a learning write committed meanwhile
                # would change the table-wide statistics between the probe's two rankings and fail it.
                with read_snapshot(conn):
                    gens = generations(run)
                    lexicon = self._read(run, owners, colls, gens)
                    agrees = lexicon is None or agrees_with_fts5(run, lexicon, owners, colls)
                if not agrees:
                    warnings.warn(f"SQLite {sqlite3.sqlite_version}'s FTS5 ranks the {colls} scope otherwise than "
                                  "bara's in-memory copy: its full-text arm stays with FTS5", RuntimeWarning,
                                  stacklevel=2)
                    lexicon = None
            except sqlite3.Error:
                return  # FTS5 answers; the next search of the scope tries again
        self._built[key] = (gens, lexicon)  # None: FTS5 answers until the next write

    def _read(self, run: Run, owners: tuple[str, ...], colls: tuple[str, ...], gens: tuple[int, ...]) -> Lexicon | None:
        """The scope's lexicon: in memory when small, else the persisted one (loaded when it is as of
        ``gens``, else rebuilt) with MaxScore's bounds. ``topk_min`` 0: always the small kind."""
        if self.location is None or self.topk_min <= 0 or scope_rows(run, owners, colls) < self.topk_min:
            return build_lexicon(run, owners, colls, gens)
        folder = sqlite_lexicon_file.folder_of(self.location, owners, colls)
        found = sqlite_lexicon_file.load(folder, gens, sqlite_lexicon_file.fingerprint(run, owners, colls))
        if found is not None:
            return found
        try:
            return sqlite_lexicon_file.build(run, owners, colls, gens, folder)
        except OSError as exc:  # a read-only folder, a full disk: FTS5 answers until the scope is written
            warnings.warn(f"bara could not write the full-text index {folder} ({exc}): the {colls} scope's "
                          "full-text arm stays with FTS5 until it is written again", RuntimeWarning, stacklevel=2)
            return None

    def wait(self) -> None:
        """Until every build under way has finished (``Bara.warm``, close, tests)."""
        with self._lock:
            threads = list(self._building.values())
        for thread in threads:
            thread.join()

    def close(self) -> None:
        """Start no more builds and wait for those under way (they hold their own connections)."""
        with self._lock:
            self._closed = True
        self.wait()


def agrees_with_fts5(run: Run, lexicon: Lexicon, owners: Sequence[str], colls: Sequence[str]) -> bool:
    """A probe before first use: the scope's most common (of at most ``PROBE_ROWS`` rows), a middling and its rarest term, ranked by
    FTS5's query and by ``lexicon``, must give the same rows and scores (an FTS5 that stores or scores
    otherwise, in some other SQLite, keeps its own query)."""
    names = list(lexicon.terms)  # in id order
    sizes = np.diff(lexicon.start)
    held = np.flatnonzero(sizes <= PROBE_ROWS)  # FTS5 ranks ~1 us a row: no 10^6-row term in the probe
    by_rows = held[np.argsort(-sizes[held], kind="stable")]
    picks = sorted({0, len(by_rows) // 2, len(by_rows) - 1}) if len(by_rows) else []
    probe = tuple(t for t in (names[int(by_rows[i])] for i in picks) if PLAIN.fullmatch(t))
    if not probe:
        return True
    req = SearchRequest(terms=probe, vector=None, limit=20, owners=tuple(owners), collections=tuple(colls))
    return lexicon.rows(run, probe, req.title_weight, req.limit) == lexical_rows(run(LEXICAL_SQL, lexical_params(req)))


def scope_rows(run: Run, owners: Sequence[str], colls: Sequence[str]) -> int:
    """The scope's chunks (an index count)."""
    marks_o, marks_c = ",".join("?" * len(owners)), ",".join("?" * len(colls))
    found = run(f"SELECT count(*) FROM chunks WHERE owner IN ({marks_o}) AND collection IN ({marks_c})",
                (*owners, *colls))
    return int(found[0][0])
