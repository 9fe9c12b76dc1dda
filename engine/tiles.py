"""Tiles and sets (C1, C2): a tile is a pair of pips, low half first."""

from __future__ import annotations

from functools import cache

from events.vocabulary import SET_SIZES as SET_SIZES  # the schema's words: events.vocabulary
from events.vocabulary import Tile as Tile


def tile(a: int, b: int) -> Tile:
    """Return the normalized tile with halves ``a`` and ``b``."""
    return (a, b) if a <= b else (b, a)


@cache
def full_set(top: int) -> tuple[Tile, ...]:
    """Every tile of the double-``top`` set, in canonical order (0-0, 0-1, … top-top)."""
    return tuple((a, b) for a in range(top + 1) for b in range(a, top + 1))


@cache
def tile_set(top: int) -> frozenset[Tile]:
    """Every tile of the double-``top`` set, as a set (C1)."""
    return frozenset(full_set(top))


@cache
def index_of(top: int) -> dict[Tile, int]:
    """Map each tile of the double-``top`` set to its position in :func:`full_set`."""
    return {t: i for i, t in enumerate(full_set(top))}


def pips(t: Tile) -> int:
    """A tile's value: the sum of its halves (C2)."""
    return t[0] + t[1]


def is_double(t: Tile) -> bool:
    """Whether both halves of the tile show the same number."""
    return t[0] == t[1]


def weight(t: Tile) -> tuple[int, int]:
    """Sort key for 'heaviest' (E2): highest pips, then the highest single half."""
    return (t[0] + t[1], t[1])


def other_half(t: Tile, number: int) -> int:
    """The half left exposed when ``t`` is matched to ``number`` (a double shows ``number``)."""
    return t[1] if t[0] == number else t[0]


def format_tile(t: Tile) -> str:
    """Human form of a tile, e.g. ``[3|5]``."""
    return f"[{t[0]}|{t[1]}]"


def parse_tile(text: str) -> Tile:
    """Parse ``3-5``, ``3|5``, ``[3|5]`` or ``35`` into a tile; raise ValueError if malformed."""
    s = text.strip().strip("[]")
    for sep in ("-", "|", ",", ":"):
        if sep in s:
            a, b = s.split(sep, 1)
            return tile(int(a), int(b))
    if len(s) == 2 and s.isdigit():
        return tile(int(s[0]), int(s[1]))
    raise ValueError(f"not a tile: {text!r} (write it as 3-5)")
