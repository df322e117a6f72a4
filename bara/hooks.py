"""Hook points registered on one assistant object: change behaviour without editing the pipeline.

A hook is ``fn(value, context) -> value | None``: it returns a replacement of
the same type, or None to leave the value unchanged. Points and their values:

* ``policy_override``   — :class:`bara.decide.PolicyDecision`, before any retrieval;
* ``before_generation`` — :class:`bara.prompts.frames.Prompt`, the assembled frames;
* ``after_generation``  — ``str``, the answer, before it is shown;
* ``before_persist``    — :class:`PersistPlan`, what will be stored (``plan.veto(...)`` stores nothing).

A hook that raises, or returns the wrong type, is recorded in the turn's trace
and the turn goes on with the value as it was before that hook — unless the
assistant is strict, in which case :class:`HookError` is raised.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from bara.errors import BaraError
from bara.trace import HookErrorRecord

HOOK_POINTS = ("policy_override", "before_generation", "after_generation", "before_persist")

Hook = Callable[[Any, "HookContext"], Any]


class HookError(BaraError):
    """A hook failed while the assistant runs in strict mode: the hook's author must fix it."""


@dataclass(frozen=True)
class HookContext:
    """Read-only facts about the turn a hook runs in."""

    point: str
    user_id: str
    conversation_id: str
    message: str
    mode: str
    turn: int
    intent: str = ""
    route: str = ""
    behavior_mode: str = ""
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class PersistPlan:
    """What the turn is about to store. Hooks return a changed copy, or ``plan.veto(reason)``."""

    user_text: str
    assistant_text: str
    learn_profile: bool = True
    extract_notes: bool = True
    add_qa: bool = True
    vetoed: bool = False
    veto_reason: str = ""

    def veto(self, reason: str = "vetoed by hook") -> "PersistPlan":
        """A copy that stores nothing at all (not even the conversation turn)."""
        return replace(self, vetoed=True, veto_reason=reason)


@dataclass(frozen=True)
class HookRun:
    value: Any
    errors: tuple[HookErrorRecord, ...] = ()


def _name(fn: Hook) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class Hooks:
    """The hooks of one assistant, in registration order per point."""

    def __init__(self) -> None:
        self._by_point: dict[str, list[Hook]] = {p: [] for p in HOOK_POINTS}

    def add(self, point: str, fn: Hook) -> None:
        self._check(point)
        if not callable(fn):
            raise TypeError(f"hook for {point!r} must be callable, got {type(fn).__name__}")
        self._by_point[point].append(fn)

    def remove(self, point: str, fn: Hook) -> None:
        self._check(point)
        if fn in self._by_point[point]:
            self._by_point[point].remove(fn)

    def registered(self, point: str) -> tuple[Hook, ...]:
        self._check(point)
        return tuple(self._by_point[point])

    def run(self, point: str, value: Any, context: HookContext, *, strict: bool = False) -> HookRun:
        """Apply every hook of ``point`` in order; see the module docstring for failures."""
        errors: list[HookErrorRecord] = []
        for fn in self.registered(point):
            value, error = _apply(fn, point, value, context)
            if error is not None:
                if strict:
                    raise HookError(f"{point} hook {error.hook} failed: {error.error}. Fix the hook, "
                                    "or run the assistant with strict=False to record and skip it.")
                errors.append(error)
        return HookRun(value, tuple(errors))

    @staticmethod
    def _check(point: str) -> None:
        if point not in HOOK_POINTS:
            raise ValueError(f"unknown hook point {point!r}; use one of {', '.join(HOOK_POINTS)}")


def _apply(fn: Hook, point: str, value: Any, context: HookContext) -> tuple[Any, HookErrorRecord | None]:
    try:
        result = fn(value, context)
    except Exception as exc:  # a hook is third-party code: any failure is recorded, not fatal
        return value, HookErrorRecord(point, _name(fn), f"{type(exc).__name__}: {exc}")
    if result is None:
        return value, None
    if not isinstance(result, type(value)):
        return value, HookErrorRecord(point, _name(fn), f"returned {type(result).__name__}, "
                                                        f"expected {type(value).__name__} or None")
    return result, None
