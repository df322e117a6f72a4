"""The registration seam: packages above the store register the migration steps they own.

The store names no other package's tables. Memory (with the owner-keyed identity tables every store
needs) and each domain register their steps here from a ``register()`` plug-in function (found through
:mod:`bara.plugins`); the store adds its own (core, ``store_meta``, row-level security on its tables).

A step is named (``0002_memory``), runs on some backends and has a fixed position ``(phase, rank)``:
phases run in order (schema tables, per-user row-level security, owner keys, shared-read-only
policies); within a phase the rank orders owners (store core 0, memory 10, funds 20, identity 30, store
meta 90). Several owners may contribute *parts* to one step (``0005_owner_keys`` re-keys the memory,
store and funds tables in one step): the parts are joined in ``part`` order. So the migration list is
the same whatever order the plug-ins were loaded in, and identical to the list before this seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

SCHEMA, RLS, OWNER_KEYS, SHARED_READ_ONLY = 1, 2, 3, 4
BACKENDS = ("sqlite", "postgres")


@dataclass(frozen=True)
class StepPart:
    name: str
    backend: str  # "sqlite" or "postgres"
    phase: int
    rank: int
    part: int
    statements: tuple[str, ...]


_PARTS: dict[tuple[str, str, int], StepPart] = {}


def register_step(name: str, statements: Iterable[str], *, phase: int, rank: int, part: int = 0,
                  backends: Iterable[str] = BACKENDS) -> None:
    """Add (part ``part`` of) step ``name`` for ``backends``. Registering the same part again with the
    same content is a no-op (plug-ins may be loaded twice); different content is a programming error."""
    for backend in backends:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}")
        new = StepPart(name, backend, phase, rank, part, tuple(statements))
        key = (name, backend, part)
        if _PARTS.setdefault(key, new) != new:
            raise ValueError(f"migration step {name!r} part {part} ({backend}) registered twice with different SQL")


def register_policies(name: str, tables: Iterable[tuple[str, str]], *, rank: int, shared_read_only: bool = False,
                      phase: int | None = None) -> None:
    """PostgreSQL row-level security on ``(table, owner column)`` pairs, as one step: the owner policy
    (phase RLS unless ``phase`` says otherwise) or, with ``shared_read_only``, its split into read /
    write policies (last phase)."""
    from bara.store.pg_sql import policy, shared_read_only as split

    make = split if shared_read_only else policy
    statements = tuple(s for table, column in tables for s in make(table, column))
    if phase is None:
        phase = SHARED_READ_ONLY if shared_read_only else RLS
    register_step(name, statements, phase=phase, rank=rank,
                  backends=("postgres",))


def steps_for(backend: str) -> list[tuple[str, tuple[str, ...]]]:
    """``(name, statements)`` of every registered step for ``backend``, in position order."""
    from bara import plugins

    plugins.load_all()
    grouped: dict[str, list[StepPart]] = {}
    for p in list(_PARTS.values()):
        if p.backend == backend:
            grouped.setdefault(p.name, []).append(p)
    ordered = sorted(grouped.values(), key=lambda parts: min((p.phase, p.rank, p.name) for p in parts))
    return [(parts[0].name, tuple(s for p in sorted(parts, key=lambda p: p.part) for s in p.statements))
            for parts in ordered]
