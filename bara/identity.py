"""User ids: the one check every entry point applies (library, CLI, and the future HTTP API).

The shared knowledge base is owned by ``SHARED`` (the empty string), so an empty
user id would write a user's rows as if they were the knowledge base's. Empty,
whitespace-only and non-string ids are therefore refused everywhere a user id
comes in, with a message that says what to send instead. (On PostgreSQL the
row-level-security policies also refuse any write of a ``SHARED`` row from a
user's scope, so a path that forgets this check still cannot do it.)
"""

from __future__ import annotations

from typing import Any

from bara.errors import InputError

#: Longest accepted user id; ids are keys, not text.
MAX_USER_ID_CHARS = 256


def user_id_problem(user_id: Any) -> str | None:
    """Why ``user_id`` is unusable, or None when it is fine (for callers that report errors their own way)."""
    if not isinstance(user_id, str):
        return f"a user id must be text, not {type(user_id).__name__}"
    if not user_id.strip():
        return "a user id must not be empty or only whitespace (the empty id belongs to the shared knowledge base)"
    if len(user_id) > MAX_USER_ID_CHARS:
        return f"a user id must be at most {MAX_USER_ID_CHARS} characters, not {len(user_id)}"
    return None


def require_user_id(user_id: Any) -> str:
    """``user_id`` unchanged if usable; else InputError saying what to pass."""
    problem = user_id_problem(user_id)
    if problem is not None:
        raise InputError(f"{problem}; pass the signed-in user's id, e.g. --user alice")
    return user_id
