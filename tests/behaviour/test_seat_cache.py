"""The gateway's memory of which seat a token plays: bounded in time and in size."""

from __future__ import annotations

import pytest

from services.gateway.seats import SeatCache

pytestmark = pytest.mark.behaviour


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_remembered_seat_is_forgotten_after_its_time_so_a_revoked_token_stops_working() -> None:
    """Found by a hostile client: token look-ups were cached for the life of the process, so a
    token that expired in Redis kept playing through a gateway that had seen it."""
    clock = Clock()
    seats = SeatCache(ttl_s=30, clock=clock)
    seats.put("h1", ("m-1", 0))
    clock.now = 29.9
    assert seats.get("h1") == ("m-1", 0)
    clock.now = 30.0
    assert seats.get("h1") is None
    assert len(seats) == 0


def test_the_cache_keeps_only_the_most_recently_used_tokens() -> None:
    seats = SeatCache(size=2, clock=Clock())
    seats.put("a", ("m-1", 0))
    seats.put("b", ("m-1", 1))
    assert seats.get("a") == ("m-1", 0)  # a is now the most recent
    seats.put("c", ("m-2", 0))
    assert (seats.get("a"), seats.get("b"), seats.get("c")) == (("m-1", 0), None, ("m-2", 0))
