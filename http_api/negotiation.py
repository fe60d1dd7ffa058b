"""Which answer a request's ``Accept`` header asks for, as a pure function of the header.

A browser names ``text/html`` in what it accepts (``text/html,application/xhtml+xml,...,*/*;q=0.8``);
an API client names JSON, or ``*/*`` (curl), or nothing. Only a client that names ``text/html``
itself, with a weight above 0 and at least that of any ``application/json`` it names, is answered
as a browser: a wildcard never counts as asking for a page.
"""

from __future__ import annotations

from typing import Final

HTML: Final = "text/html"
JSON: Final = "application/json"
ACCEPT_CHARS_MAX: Final = 4096  # a longer header is read only this far (browsers send ~150)


def _weight(parameters: list[str]) -> float:
    """The ``q`` of a media range (1 without one; 0 for one that is not a number in [0, 1])."""
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                weight = float(value.strip())
            except ValueError:
                return 0.0
            return weight if 0.0 <= weight <= 1.0 else 0.0
    return 1.0


def weights(accept: str) -> dict[str, float]:
    """The weight of each media range ``accept`` names (lower case; the highest when named twice)."""
    out: dict[str, float] = {}
    for item in accept[:ACCEPT_CHARS_MAX].split(","):
        media, *parameters = item.split(";")
        media = media.strip().lower()
        if media:
            out[media] = max(out.get(media, 0.0), _weight(parameters))
    return out


def prefers_html(accept: str | None) -> bool:
    """True when ``accept`` asks for a page for people rather than JSON (see the module doc)."""
    if not accept:
        return False
    named = weights(accept)
    html = named.get(HTML, 0.0)
    return html > 0.0 and html >= named.get(JSON, 0.0)
