"""Who held a seat, as results and ratings count it: an account, a pool of house bots, or a guest.

A player's name is what it typed, and anyone may type any name; so records are kept under an
identity nobody can borrow. A seat held by an account is kept under the account id (and shown
under the name the account last played as); a house bot's seat under ``house:<pool>`` (shown as
the pool's name, whatever the match called the seat); any other seat is a guest's: its results
are shown under its name, marked guest, and it is never rated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

HOUSE = "house:"
"""The prefix of a house bot pool's key (an account id never holds a colon)."""
GUEST = "guest:"
"""The prefix of a guest's results key: the name it played under, which proves nothing."""

Kind = Literal["account", "house", "guest"]


def seat_key(
    seat: int,
    players: Sequence[str],
    bots: Sequence[str | None] = (),
    accounts: Sequence[str | None] = (),
) -> str:
    """The key a seat's record is kept under: its account id, else ``house:<pool>`` for a
    house bot, else ``guest:<name>``."""
    account = accounts[seat] if accounts else None
    if account is not None:
        return account
    pool = bots[seat] if bots else None
    if pool is not None:
        return HOUSE + pool
    return GUEST + players[seat]


def kind_of(key: str) -> Kind:
    """Whether ``key`` (from :func:`seat_key`) is an account's, a house pool's or a guest's."""
    if key.startswith(HOUSE):
        return "house"
    if key.startswith(GUEST):
        return "guest"
    return "account"


def rated(key: str) -> bool:
    """Whether the seat counts in the ratings: accounts and house pools do, guests never."""
    return kind_of(key) != "guest"


def shown_name(key: str, played_as: str) -> str:
    """The name a record is shown under: a pool's or a guest's from its key, an account's the
    name it played as (the caller keeps the latest)."""
    kind = kind_of(key)
    if kind == "house":
        return key.removeprefix(HOUSE)
    if kind == "guest":
        return key.removeprefix(GUEST)
    return played_as
