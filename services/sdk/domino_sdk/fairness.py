"""Check that a match's deals were fair from what a client received (rule F1).

Each round is dealt from a secret seed: the round's first event carries the commitment
``sha256(salt ‖ seed)``, its last reveals the seed and salt. From the seed anyone derives the
deal (the algorithm below, as in the service's docs/fairness.md) and checks it against the
play: :func:`check_public` does so over the events of a spectator's (or a seat's) stream.

The algorithm, for a ``seed`` of 32 bytes, a double-``top`` set and ``players`` seats:

1. a byte stream: ``sha256(seed ‖ counter)`` for counter 0, 1, … as 8 bytes big-endian;
2. an integer below ``n``: the next 4 bytes as a big-endian word, skipped while it is at or
   above ``2**32 - 2**32 % n``, then taken modulo ``n``;
3. the order: the set sorted (0-0, 0-1, … top-top), shuffled by Fisher–Yates from the last
   index down to 1 (swap ``i`` with an integer below ``i + 1``);
4. the first leader: the next integer below ``players``.

Seat k is dealt ``order[7k:7k+7]``; the rest is the stock, drawn from its front.

This module is written apart from the server's own (it shares no code with it), so that a
client checks the service with a second implementation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import msgspec

from domino_sdk.model import Rules, Tile

HAND = 7
SEED_BYTES = 32
SALT_BYTES = 16


class Deal(NamedTuple):
    """What a seed determines: the whole set in dealt order, and the first leader's draw."""

    order: list[Tile]
    first_leader: int


class Problem(NamedTuple):
    """The first round whose deal does not check out, and what is wrong with it."""

    round: int
    message: str


class _Stream:
    """The seed's byte stream, read 4 bytes at a time."""

    def __init__(self, seed: bytes) -> None:
        self.seed = seed
        self.counter = 0
        self.buffer = b""

    def word(self) -> int:
        while len(self.buffer) < 4:
            block = hashlib.sha256(self.seed + self.counter.to_bytes(8, "big")).digest()
            self.buffer += block
            self.counter += 1
        word, self.buffer = self.buffer[:4], self.buffer[4:]
        return int.from_bytes(word, "big")

    def below(self, n: int) -> int:
        cut = (1 << 32) - (1 << 32) % n
        w = self.word()
        while w >= cut:
            w = self.word()
        return w % n


def seeded_deal(seed: bytes, top: int, players: int) -> Deal:
    """The order and first leader ``seed`` gives for a double-``top`` set and ``players``."""
    stream = _Stream(seed)
    tiles = sorted((a, b) for b in range(top + 1) for a in range(b + 1))
    i = len(tiles) - 1
    while i > 0:
        j = stream.below(i + 1)
        tiles[i], tiles[j] = tiles[j], tiles[i]
        i -= 1
    return Deal(order=tiles, first_leader=stream.below(players))


def commitment(seed: bytes, salt: bytes) -> str:
    """The commitment to a round's seed: ``sha256(salt ‖ seed)``, as hex."""
    h = hashlib.sha256()
    h.update(salt)
    h.update(seed)
    return h.hexdigest()


def check_public(
    events: Iterable[Any], rules: Rules | Mapping[str, Any] | None = None
) -> Problem | None:
    """The first revealed round whose deal does not check out, or None when every one does.

    ``events`` are what a client received, in order: stream lines or events, as dicts (parsed
    JSON) or as this SDK's structs; snapshot and turn lines are skipped. The rules come from
    ``match_created``, or ``rules`` when the events start later. For each round that has
    ended: the revealed seed and salt hash to the commitment sent with the deal; in the first
    round of a Straight match the leader is the seed's draw; every tile a seat plays was in
    its hand (dealt by the seed, plus the stock tiles it drew, front first); and the hands
    shown at the end are exactly what is left. A round still being played is not checked.
    """
    known = _rules(rules)
    start: dict[str, Any] | None = None
    moves: list[dict[str, Any]] = []
    for event in _events(events):
        kind = event.get("type")
        if kind == "match_created":
            known = _rules(event["rules"])
        elif kind == "round_started":
            start, moves = event, []
        elif kind == "round_ended" and start is not None:
            if known is None:
                return Problem(int(event["round"]), "no match_created, and no rules given")
            problem = _round(known, start, moves, event)
            if problem is not None:
                return Problem(int(start["round"]), problem)
            start = None
        elif kind in ("tile_played", "tile_drawn"):
            moves.append(event)
    return None


def _events(items: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for item in items:
        data = item if isinstance(item, Mapping) else msgspec.to_builtins(item)
        if data.get("type") == "event":  # a stream line: its event
            data = data["event"]
        if data.get("type") in ("snapshot", "turn"):
            continue
        yield dict(data)


def _rules(value: Rules | Mapping[str, Any] | None) -> Rules | None:
    if value is None or isinstance(value, Rules):
        return value
    return msgspec.convert(dict(value), Rules)


def _hex(text: Any, size: int) -> bytes | None:
    if not isinstance(text, str) or len(text) != 2 * size:
        return None
    try:
        data = bytes.fromhex(text)
    except ValueError:
        return None
    return data if data.hex() == text else None


def _tile(value: Any) -> Tile:
    a, b = value
    return (int(a), int(b))


def _round(
    rules: Rules, start: dict[str, Any], moves: list[dict[str, Any]], end: dict[str, Any]
) -> str | None:
    sealed = start.get("commitment")
    if not sealed:
        return "dealt without a commitment: nothing to check the deal against"
    seed = _hex(end.get("seed"), SEED_BYTES)
    salt = _hex(end.get("salt"), SALT_BYTES)
    if seed is None or salt is None:
        return "the round's end does not reveal a seed of 32 bytes and a salt of 16"
    if commitment(seed, salt) != sealed:
        return "the revealed seed and salt do not hash to the commitment sent with the deal"
    n = rules.players
    deal = seeded_deal(seed, rules.top, n)
    if start["round"] == 1 and rules.family == "straight" and start["leader"] != deal.first_leader:
        return f"seat {start['leader']} leads, the seed draws seat {deal.first_leader}"
    hands = [set(deal.order[HAND * k : HAND * (k + 1)]) for k in range(n)]
    stock = deal.order[HAND * n :]
    if list(start["hand_sizes"]) != [HAND] * n or start["stock_size"] != len(stock):
        return "the hand and stock sizes sent with the deal are not the seed's"
    drawn = 0
    for move in moves:
        seat = move["seat"]
        if not 0 <= seat < n:
            return f"seat {seat} moves, but there is no such seat"
        if move["type"] == "tile_drawn":
            if drawn == len(stock):
                return f"seat {seat} draws from an empty stock"
            hands[seat].add(stock[drawn])
            drawn += 1
            continue
        t = _tile(move["tile"])
        if t not in hands[seat]:
            return f"seat {seat} plays {t[0]}-{t[1]}, which the seed's deal did not give it"
        hands[seat].discard(t)
    shown = end["hands"]
    if len(shown) != n:
        return f"{len(shown)} hands shown at the round's end for {n} seats"
    for seat in range(n):
        if sorted(_tile(t) for t in shown[seat]) != sorted(hands[seat]):
            return f"seat {seat}'s hand at the round's end is not what the seed's deal leaves"
    if end.get("stock") is not None and [_tile(t) for t in end["stock"]] != stock[drawn:]:
        return "the stock shown at the round's end is not what the seed's deal leaves"
    return None
