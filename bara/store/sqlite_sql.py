"""The SQL text the SQLite store builds, and the rows it reads back (``bara.store.sqlite``)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from bara.types import StoredChunk


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (its last character plus one),
    or None when there is none to write (the last code point, or a surrogate next)."""
    last = ord(prefix[-1]) + 1
    return None if last > 0x10FFFF or 0xD800 <= last <= 0xDFFF else prefix[:-1] + chr(last)


def marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


def generations(run: Any, owners: Sequence[str], colls: Sequence[str]) -> tuple[int, ...]:
    """The write generation of each (owner, collection) scope, as ``run``'s connection sees them."""
    rows = dict(((o, c), g) for o, c, g in run(
        f"SELECT owner, collection, gen FROM scope_generation WHERE owner IN ({marks(owners)})"
        f" AND collection IN ({marks(colls)})", (*owners, *colls)))
    return tuple(rows.get((o, c), 0) for o in owners for c in colls)


def chunks_sql(n_ids: int, n_owners: int | None) -> str:
    """The query that reads ``n_ids`` chunks by id, optionally only those of ``n_owners`` owners.

    The owner test is written ``+c.owner`` so that SQLite looks the few ids up by primary key: left
    to itself, with no statistics, it walks the owner index instead, i.e. every chunk of the shared
    knowledge base, for each search's handful of hits (0.1 ms at 1,152 chunks, growing with the KB)."""
    sql = (f"SELECT c.id, c.text, d.source, c.section, c.title, c.collection, c.owner, c.ordinal,"
           f" c.start_char, c.end_char, d.title, d.meta FROM chunks c JOIN documents d ON d.id = c.doc_id"
           f" WHERE c.id IN ({marks(range(n_ids))})")
    return sql if n_owners is None else sql + f" AND +c.owner IN ({marks(range(n_owners))})"


def stored_chunk(r: tuple) -> StoredChunk:
    meta = json.loads(r[11]) if r[11] else {}
    return StoredChunk(id=r[0], text=r[1], source=r[2], section=r[3], title=r[4] or r[10], collection=r[5],
                       owner=r[6], ordinal=r[7], start=r[8], end=r[9], meta={**meta, "doc_title": r[10]})
