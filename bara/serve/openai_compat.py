"""OpenAI-compatible chat completions (filled in below the skeleton)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
