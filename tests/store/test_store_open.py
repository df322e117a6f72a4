"""``open_store`` builds the backend from the settings it is handed: a caller that overrides a setting
(``Bara(settings)``, a test, ``--db`` with a tuned ``Settings``) gets that store, not one rebuilt from the
environment."""

from __future__ import annotations

import os

from bara.settings import Settings
from bara.store import open_store, pg_server


def test_open_store_opens_postgresql_with_the_settings_it_is_given(pg_server_urls, pg_schema, monkeypatch,
                                                                   tmp_path):
    monkeypatch.chdir(tmp_path)  # no bara.toml: nothing but the given settings names the schema
    for name in [k for k in os.environ if k.startswith("BARA_PG_")]:
        monkeypatch.delenv(name)
    settings = Settings(pg_schema=pg_schema, pg_admin_url=pg_server_urls.owner_url, pg_app_role=pg_server.APP_ROLE,
                        pg_embedding_dim=8, pg_pool_size=2)
    store = open_store(pg_server_urls.app_url, settings=settings)
    try:
        assert store.schema == pg_schema and store.dim == 8
    finally:
        store.close()
