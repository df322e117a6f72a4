"""bara's exceptions. Each message says who must act and how to fix it."""

from __future__ import annotations


class BaraError(Exception):
    """Base class for every error bara raises on purpose."""


class ConfigError(BaraError):
    """A setting or settings file is invalid: the user must correct it."""


class StoreError(BaraError):
    """The store cannot be opened or used as asked (corrupt, foreign, newer schema...)."""


class MissingStoreError(StoreError):
    """A command that needs an existing store was pointed at a path with none (a mistyped --db?)."""

    def __init__(self, location: str):
        super().__init__(f"no store at {location} (create one with `bara ingest PATH --db {location}`); "
                         "check the --db path")
        self.location = location


class StoreFaultError(StoreError):
    """The store failed while in use, through nothing the caller sent: the command or request was refused
    whole (nothing of it stored) and may be retried once the fault clears. ``code`` names the cause:
    ``store_busy`` (another writer held the lock past ``store_busy_timeout_s``, or every pooled connection
    was in use), ``store_full`` (the disk is full), ``store_read_only`` (the file system or file became
    read-only), ``store_unavailable`` (an I/O error, or the database server cannot be reached)."""

    code = "store_unavailable"


class StoreBusyError(StoreFaultError):
    code = "store_busy"


class StoreFullError(StoreFaultError):
    code = "store_full"


class StoreReadOnlyError(StoreFaultError):
    code = "store_read_only"


class StoreUnavailableError(StoreFaultError):
    code = "store_unavailable"


class EmbedderError(BaraError):
    """The embedding model cannot be loaded or run."""


class InputError(BaraError):
    """The caller passed input bara cannot use (bad file format, unknown id...)."""


class UnknownConversationError(InputError):
    """A conversation id the user cannot use: unknown, another user's, or deleted while a turn waited for it."""
