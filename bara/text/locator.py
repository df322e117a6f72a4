"""Where a passage sits, said once: ``§7.4.1 Hello Messages``, ``p. 4 §2.1 Title``, ``§Install``.

A chunk carries a ``section`` and a ``title``. The RFC chunker stores the number and the heading
(``7.4.1`` / ``Hello Messages``); the document readers store the whole heading, with the page in
front for PDF (``p. 4 §2.1 Title`` / ``Title``); the old Markdown chunker stored the heading path
(``Guide > Install`` / ``Install``). The title is shown only when the section does not already end
with it, so no heading is printed twice.
"""

from __future__ import annotations

_SEPARATORS = (" ", "\u00a7", ">")


def locator(section: str, title: str) -> str:
    """The section and heading of a passage as a source line shows them after the file name."""
    section, title = section.strip(), title.strip()
    where = section if section.startswith("p. ") else f"\u00a7{section}" if section else ""
    if title and where.endswith(title) and (len(where) == len(title)
                                            or where[-len(title) - 1] in _SEPARATORS):
        title = ""
    return " ".join(part for part in (where, title) if part)
