"""A large knowledge base's lexicon, compact and persisted beside the SQLite file (``<db>.lex/``).

``sqlite_bm25.build_lexicon`` reads a scope in one statement and sorts every token at once: ~16 bytes a
posting to keep (int32 row, three int32 counts) and several times that while it sorts, so 10^5 chunks
peaked a server near 1.1 GB while it warmed, and 10^6 (about 68 million postings) would not fit 2 GB. A
scope of at least ``lexical_topk_min_chunks`` is built here instead:

- in pages of ``PAGE`` rows (by id), each page's postings sorted and written to a scratch file, then
  spliced into their terms' places in the final arrays, which are memory-mapped files: the build holds
  one page and the per-row lengths, whatever the scope's size;
- compact: a posting is a uint32 row and two uint16 counts (body, heading; the scope column weighs 0.0,
  ``lexical_topk.frequencies``), 8 bytes; ids int64 and lengths float64 per row, once;
- with each term's MaxScore bound (``lexical_topk.term_bounds``, at ``REF_WEIGHT`` and the table's
  average length when built);
- labelled with the scope's write generations (``meta.json``): a process that finds the file as of the
  scope's generations maps it (a few ms, no tokenising); any other generations rebuild it.

What bounds memory: the postings and counts are memory-mapped, so their pages are the kernel's page
cache (only those a query touched are resident, and they can be dropped); in the heap stay the ids and
lengths (16 bytes a row), the term dictionary and the bounds (a few MB at 10^6 rows of SciFact text).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
from numpy.lib.format import open_memmap

from bara.store.lexical_topk import term_bounds
from bara.store.sqlite_bm25 import Lexicon, WholeHint, postings, scope_sql, table_stats
from bara.store.sqlite_lexical import KB_FTS, Run

VERSION = 1  # the files' layout
PAGE = 20_000  # rows read and sorted at a time
REF_WEIGHT = 2.0  # the title weight the bounds are computed at (SearchRequest's default)
COUNT_MAX = np.iinfo(np.uint16).max


def folder_of(location: str, owners: Sequence[str], colls: Sequence[str]) -> Path:
    """Where the scope's persisted lexicon lives: ``<db>.lex/<scope hash>``."""
    scope = hashlib.sha1("\x1e".join(("\x1f".join(owners), "\x1f".join(colls))).encode()).hexdigest()[:16]
    return Path(f"{location}.lex") / scope


def fingerprint(run: Run, owners: Sequence[str], colls: Sequence[str]) -> list[int | str]:
    """(the scope's rows, its last id, the table's rows and tokens, a digest of its documents' content
    hashes): generations count writes, so a store deleted and written again to as many generations
    passes them; its documents do not pass this (~0.1 s for 10^5 documents)."""
    marks_o, marks_c = ",".join("?" * len(owners)), ",".join("?" * len(colls))
    where = f"WHERE owner IN ({marks_o}) AND collection IN ({marks_c})"
    n, last = run(f"SELECT count(*), coalesce(max(id), 0) FROM chunks {where}", (*owners, *colls))[0]
    digest = hashlib.sha1()
    for (content,) in run(f"SELECT content_hash FROM documents {where} ORDER BY id", (*owners, *colls)):
        digest.update(f"{content}\n".encode())
    n_row, n_token, _ = table_stats(run, ())
    return [int(n), int(last), n_row, n_token, digest.hexdigest()]


def load(folder: Path, gens: tuple[int, ...], mark: list[int | str] | None = None) -> Lexicon | None:
    """The lexicon persisted in ``folder`` if it is as of ``gens`` (and of the :func:`fingerprint`
    ``mark`` when given; its postings memory-mapped), else None."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("version") != VERSION or tuple(meta.get("gens", ())) != gens:
            return None
        if mark is not None and meta.get("fingerprint") != mark:
            return None
        terms = (folder / "terms.txt").read_text().split("\n") if meta["terms"] else []
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r" if name in ("rows", "counts") else None)
                  for name in ("ids", "length", "start", "rows", "counts", "bound")}
    except (OSError, ValueError, KeyError):
        return None
    if len(terms) != meta["terms"] or len(arrays["ids"]) != meta["rows"]:
        return None
    # plain views of the maps: indexing a ``np.memmap`` costs a Python call each time (~70 us)
    return Lexicon(gens, arrays["ids"], arrays["length"], {t: i for i, t in enumerate(terms)}, arrays["start"],
                   np.asarray(arrays["rows"]), np.asarray(arrays["counts"]), False, int(meta["tokens"]), WholeHint(False), arrays["bound"],
                   (REF_WEIGHT, float(meta["avgdl"])))


def build(run: Run, owners: Sequence[str], colls: Sequence[str], gens: tuple[int, ...], folder: Path) -> Lexicon | None:
    """Read the scope page by page into ``folder`` (replacing what was there) and load it; None when a
    row's tokens do not add up to FTS5's count or a count does not fit 16 bits (the caller then leaves the
    scope to FTS5)."""
    mark = fingerprint(run, owners, colls)
    n_row, n_token = int(mark[2]), int(mark[3])
    avgdl = float(n_token) / float(n_row) if n_row else 1.0
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
    try:
        pages = read_pages(run, owners, colls, work)
        if pages is None:
            return None
        terms, ids, length, df, names = pages
        bound = splice(work, names, df, length, avgdl)
        np.save(work / "ids.npy", ids)
        np.save(work / "length.npy", length)
        np.save(work / "bound.npy", bound)
        (work / "terms.txt").write_text("\n".join(terms))
        meta = {"version": VERSION, "gens": list(gens), "rows": len(ids), "terms": len(terms),
                "tokens": int(length.sum()), "avgdl": avgdl, "postings": int(df.sum()), "fingerprint": mark}
        (work / "meta.json").write_text(json.dumps(meta))
        for name in names:
            os.remove(work / name)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(work, folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return load(folder, gens, mark)


def read_pages(run: Run, owners: Sequence[str], colls: Sequence[str], work: Path):
    """Pass 1: each page's postings (global term, row, body, heading), sorted by term then row, into a
    scratch file; returns (terms, ids, lengths, postings per term, the files) or None (see :func:`build`)."""
    terms: dict[str, int] = {}
    ids, lengths, names = [], [], []
    df = np.zeros(0, dtype=np.int64)
    last, offset = -1, 0
    while True:
        rows = run(scope_sql(KB_FTS, len(owners), len(colls), after=True), (*owners, *colls, last, PAGE))
        if not rows:
            break
        found = postings(rows)
        if found is None:
            return None
        local, page_ids, page_length, start, rows_of, counts = found
        if counts[:, :2].max(initial=0) > COUNT_MAX:
            return None
        remap = np.fromiter((terms.setdefault(t, len(terms)) for t in local), dtype=np.int64, count=len(local))
        term = remap[np.repeat(np.arange(len(local)), np.diff(start))]
        order = np.argsort(term, kind="stable")  # by global term; rows stay ascending within a term
        name = f"page{len(names)}.npz"
        np.savez(work / name, term=term[order].astype(np.uint32), row=(rows_of[order] + offset).astype(np.uint32),
                 counts=counts[order, :2].astype(np.uint16))
        names.append(name)
        df = np.concatenate([df, np.zeros(len(terms) - len(df), dtype=np.int64)])
        df += np.bincount(term, minlength=len(terms))
        ids.append(page_ids)
        lengths.append(page_length)
        offset += len(rows)
        last = int(page_ids[-1])
    if not names:
        return None
    return list(terms), np.concatenate(ids), np.concatenate(lengths), df, names


def splice(work: Path, names: list[str], df: np.ndarray, length: np.ndarray, avgdl: float) -> np.ndarray:
    """Pass 2: every page's postings into its terms' places in ``rows.npy`` and ``counts.npy`` (pages in
    row order, so each term's rows stay ascending), and each term's bound; returns the bounds."""
    start = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
    np.save(work / "start.npy", start)
    total = int(start[-1])
    rows_out = open_memmap(work / "rows.npy", mode="w+", dtype=np.uint32, shape=(total,))
    counts_out = open_memmap(work / "counts.npy", mode="w+", dtype=np.uint16, shape=(total, 2))
    filled = start[:-1].copy()
    bound = np.zeros(len(df))
    for name in names:
        with np.load(work / name) as page:
            term, row, counts = page["term"].astype(np.int64), page["row"], page["counts"]
        runs = np.flatnonzero(np.concatenate([[True], term[1:] != term[:-1]]))
        held = term[runs]
        rank = np.arange(len(term)) - np.repeat(runs, np.diff(np.append(runs, len(term))))
        at = filled[term] + rank
        rows_out[at] = row
        counts_out[at] = counts
        filled[held] += np.diff(np.append(runs, len(term)))
        bound[held] = np.maximum(bound[held], term_bounds(counts, length[row], runs, REF_WEIGHT, avgdl))
    rows_out.flush()
    counts_out.flush()
    del rows_out, counts_out
    return bound
