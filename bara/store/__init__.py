"""Stores: the protocol and its backends. ``open_store`` picks one from a location."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bara.errors import ConfigError
from bara.store.base import SqlRunner, Store

if TYPE_CHECKING:
    from bara.settings import Settings

__all__ = ["Store", "SqlRunner", "open_store"]


def open_store(location: str, mode: str = "write", settings: Settings | None = None) -> Store:
    """A ``postgresql://`` URL opens PostgreSQL (its ``pg_*`` settings from ``settings``; None: from
    BARA_PG_* / bara.toml);
    a SQLite file path (or ``:memory:``) opens the embedded store. ``mode`` (SQLite): ``read`` needs
    an existing store and accepts a read-only file, ``write`` may create one, ``update`` may not.
    ``settings`` (SQLite): the store's own bounds (``store_matrix_cache_scopes`` and ``_mb``; default: the
    defaults)."""
    if location.startswith(("postgresql://", "postgres://")):
        return _open_postgres(location, settings)
    from bara.store.sqlite import SQLiteStore
    from bara.store.sqlite_ann import AnnConfig

    if settings is None:
        return SQLiteStore(location, mode=mode)
    return SQLiteStore(location, mode=mode, matrix_scopes=settings.store_matrix_cache_scopes,
                       matrix_mb=settings.store_matrix_cache_mb, lexicon_scopes=settings.lexical_memory_cache_scopes,
                       busy_timeout_s=settings.store_busy_timeout_s, ann=AnnConfig.from_settings(settings),
                       lexicon_topk_min=settings.lexical_topk_min_chunks,
                       integrity=settings.store_integrity_check)


def _open_postgres(url: str, settings: Settings | None) -> Store:
    try:
        from bara.store.postgres import PostgresStore
    except ImportError as exc:
        raise ConfigError(f"the PostgreSQL backend needs psycopg, psycopg-pool and pgvector ({exc}): "
                          "run `pip install 'bara[postgres]'` (from a clone: `pip install -e '.[postgres]'`)") from exc
    if settings is None:
        from bara.settings import load_settings

        settings = load_settings()
    s = settings
    return PostgresStore(url, dim=s.pg_embedding_dim, schema=s.pg_schema, admin_url=s.pg_admin_url,
                         app_role=s.pg_app_role, pool_size=s.pg_pool_size, ef_search=s.pg_ef_search,
                         pool_timeout_s=s.pg_pool_timeout_s, lexical_rank=s.pg_lexical_rank,
                         private_exact_max=s.pg_private_exact_max,
                         lexical_bounded_min_rows=s.pg_lexical_bounded_min_rows,
                         lexical_candidates=s.pg_lexical_candidates,
                         lexical_terms_min_rows=s.pg_lexical_terms_min_rows)
