"""Account names: what may be registered, and when two names are the same name.

A name is 2 to 20 characters of ``A-Z a-z 0-9 _ -``, beginning with a letter or a digit: no
control, format, markup or look-alike Unicode characters can reach a terminal, a page or a
log through it. Names are unique by their *skeleton* — the name case-folded, with ``_`` and
``-`` dropped and the digits that pass for letters read as those letters (``0`` as ``o``,
``1`` and ``i`` as ``l`` …) — so ``Greedy``, ``gr33dy`` and ``g-r-e-e-d-y`` are one name. The
house bot pools and the service's own words are reserved in the same way.
"""

from __future__ import annotations

import re

from engine.strategy import STRATEGIES

MIN_NAME = 2
MAX_NAME = 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{1,19}")
_LOOKALIKE = str.maketrans(
    {"0": "o", "1": "l", "i": "l", "j": "l", "2": "z", "3": "e", "4": "a", "5": "s", "6": "b",
     "7": "t", "8": "b", "9": "g", "_": None, "-": None}
)  # fmt: skip
RESERVED_WORDS = (
    "house", "guest", "operator", "admin", "administrator", "root", "system", "domino", "dominoes",
    "referee", "gateway", "projector", "bot", "bots", "server", "service", "external", "anonymous",
    "nobody", "null", "none", "seat", "moderator", "support",
)  # fmt: skip


class BadName(ValueError):
    """Raised for a name that may not be registered; ``code`` says why (bad_name,
    reserved_name)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def skeleton(name: str) -> str:
    """What a name looks like once case, separators and look-alike characters are ignored."""
    folded = name.casefold().translate(_LOOKALIKE)
    return folded.replace("rn", "m").replace("vv", "w")


def _reserved(pools: tuple[str, ...]) -> set[str]:
    return {skeleton(w) for w in (*RESERVED_WORDS, *STRATEGIES, *pools)}


def check_name(name: object, pools: tuple[str, ...] = ()) -> str:
    """``name`` if it may be registered; raises BadName otherwise. ``pools``: more house bot
    pool names to reserve besides the built-in strategies."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise BadName(
            "bad_name",
            f"a name is {MIN_NAME} to {MAX_NAME} characters of A-Z a-z 0-9 _ -, "
            "beginning with a letter or a digit",
        )
    shape = skeleton(name)
    reserved = _reserved(pools)
    if shape in reserved or any(shape.startswith(w) for w in (skeleton("house"), "guest")):
        raise BadName("reserved_name", f"{name!r} is reserved for the service or its house bots")
    return name
