"""JSON with lone UTF-16 surrogate escapes ("\\ud83d": legal JSON, e.g. half an emoji cut by a model),
which the MCP SDK's parser rejects: re-encoded with U+FFFD in their place, on stdio and over HTTP alike."""

from __future__ import annotations

import json

from bara.text.surrogates import json_without_surrogates


def clean_line(line: str) -> str:
    """A JSON-RPC line with lone UTF-16 surrogate escapes ("\\ud83d", legal JSON) re-encoded with
    U+FFFD in their place. The SDK's parser rejects such a line and answers nothing, so a client
    waited for ever; a pair ("\\ud83d\\ude00") is one character and stays. Other lines pass as they are."""
    if "\\u" not in line:
        return line
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's parser: refused later
        return line
    return json.dumps(json_without_surrogates(message), ensure_ascii=False) + ("\n" if line.endswith("\n") else "")
