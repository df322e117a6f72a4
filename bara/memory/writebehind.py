"""Write-behind for what a turn learned: its notes, Q&A pair and episodic record.

A gated turn stores its conversation record (messages, state, cached vectors) and the profile
facts before it answers, in one transaction. The other learning writes (notes, Q&A, episodic
record: embeddings, FTS rows, each a document) are queued here and applied after the answer is
out, all in one transaction per user, by :meth:`WriteBehind.flush`, which runs:

- at the start of the next turn of any conversation (``Assistant.turn``), so a turn always sees
  what the previous one learned in this process;
- by ``bara serve`` before it responds (the default), or right after the response is sent
  (``serve_learn_after_response``, one worker only: ``Runtime.learn_later``): the queue is per
  process, and with several workers the next turn may reach another one;
- when the surface has delivered the answer (``bara chat`` after printing it), i.e. in idle time;
- before any read or delete of memory outside a turn (``bara memory``, the HTTP memory routes,
  MCP tools, evaluation clean-up), and on ``Bara.close()``.

Crash safety, honestly: nothing is lost on a normal close or between turns, but if the process
dies after a turn answered and before the flush, that turn's notes, Q&A pair and episodic record
are lost (its messages and profile facts are already stored). A flush that fails raises; the
batch it held is not retried.

Besides writes, a turn may queue *preparations* (:meth:`WriteBehind.prepare`): pure work for the
conversation's next turn, such as analysing the history that turn's rewrite will read. They touch
no store, run after the writes, and only fill caches: skipped or lost, the next turn computes the
same result itself.
"""

from __future__ import annotations

import threading
from typing import Callable

from bara.store.base import Store
from bara.types import SHARED


class WriteBehind:
    """Queued writes, each bound to the user whose scope it needs; thread-safe."""

    def __init__(self, store: Store):
        self.store = store
        self._pending: list[tuple[str, Callable[[], object]]] = []
        self._prepared: list[Callable[[], object]] = []
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # a flush returns only once every write queued before it is stored

    def defer(self, user_id: str, *writes: Callable[[], object]) -> None:
        with self._lock:
            self._pending.extend((user_id, w) for w in writes)

    def prepare(self, *tasks: Callable[[], object]) -> None:
        """Queue pure work for a next turn (no store access), run by :meth:`flush` after the writes."""
        with self._lock:
            self._prepared.extend(tasks)

    def __len__(self) -> int:
        return len(self._pending)

    def flush(self) -> int:
        """Apply every queued write, in order, one transaction per user; returns how many ran.

        Concurrent callers wait for a flush under way, so none returns before earlier writes are stored."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, []
                tasks, self._prepared = self._prepared, []
            for user in dict.fromkeys(user for user, _ in batch):
                with self.store.scoped((SHARED, user)), self.store.transaction():
                    for owner, write in batch:
                        if owner == user:
                            write()
            for task in tasks:
                task()
        return len(batch)
