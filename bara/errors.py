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


class EmbedderError(BaraError):
    """The embedding model cannot be loaded or run."""


class InputError(BaraError):
    """The caller passed input bara cannot use (bad file format, unknown id...)."""


class UnknownConversationError(InputError):
    """A conversation id the user cannot use: unknown, another user's, or deleted while a turn waited for it."""
