"""Fair deals anyone can check (rule F1, docs/fairness.md): the shuffle a seed determines, the
commitment that binds the referee to it, and the check of a match's log round by round.

The referee picks a secret ``seed`` and ``salt`` for each round, deals the order this module
derives from the seed, and records ``commitment(seed, salt)`` in ``RoundStarted`` before anyone
moves; ``RoundEnded`` reveals both. Nothing here draws a random number, reads a clock or does
I/O: the same seed gives the same deal everywhere, so any reader of the log can re-derive it.

The algorithm, step by step (docs/fairness.md has it with a known-answer vector):

1. A byte stream: the blocks ``SHA-256(seed ‖ counter)`` for counter 0, 1, 2, … written as 8
   bytes big-endian, concatenated.
2. A uniform integer below ``n``: read the next 4 bytes as a big-endian word ``w``; reject it
   and read the next while ``w >= 2**32 - 2**32 % n``; the integer is ``w % n``.
3. The order: the whole double-``top`` set in canonical order (0-0, 0-1, … top-top), then
   Fisher–Yates from the last index ``i`` down to 1, swapping ``i`` with an integer below
   ``i + 1``.
4. The first leader (S1): the next integer below the number of players.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import msgspec

from engine.rules import HAND_SIZE
from engine.tiles import format_tile, full_set
from events.model import AnyEvent, MatchCreated, RoundEnded, RoundStarted, TileDrawn, TilePlayed
from events.vocabulary import Rules, Tile

SEED_BYTES = 32
"""A round's seed: 32 bytes, 64 hex digits."""
SALT_BYTES = 16
"""A round's salt: 16 bytes, 32 hex digits. With the seed it keeps the commitment from being
searched: nobody can try seeds against it before the reveal."""

_WORD = 2**32


class SeedError(ValueError):
    """Raised when a seed or salt is not lowercase hex of the right length."""


class SeededDeal(msgspec.Struct, frozen=True, kw_only=True):
    """What a seed determines: the whole set in dealt order, and the first leader's draw."""

    order: tuple[Tile, ...]
    first_leader: int


class Unfair(msgspec.Struct, frozen=True, kw_only=True):
    """The first round whose deal does not check out, and why (F1)."""

    round: int
    message: str


class RoundCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One round's fairness: its commitment, whether it was revealed yet, and what is wrong
    (None: the revealed seed deals exactly what was played)."""

    round: int
    commitment: str | None
    revealed: bool
    problem: str | None = None


# ---------------------------------------------------------------------------------------------
# the shuffle


def parse_hex(text: str, size: int, what: str) -> bytes:
    """The bytes of ``text``; raise SeedError unless it is ``size`` bytes of lowercase hex."""
    try:
        data = bytes.fromhex(text)
    except ValueError:
        raise SeedError(f"the {what} is not hex: {text[:16]!r}") from None
    if len(data) != size or data.hex() != text:
        raise SeedError(f"the {what} must be {size} bytes written as {2 * size} lowercase hex")
    return data


def byte_stream(seed: bytes) -> Iterator[int]:
    """The seed's endless byte stream: ``SHA-256(seed ‖ counter)`` blocks, counter 0, 1, …
    as 8 bytes big-endian."""
    counter = 0
    while True:
        yield from hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        counter += 1


class Draws:
    """Uniform integers read from a seed's byte stream (steps 1 and 2 of the module's doc)."""

    def __init__(self, seed: bytes) -> None:
        self._seed = seed
        self._counter = 0
        self._block = b""
        self._at = 0

    def word(self) -> int:
        """The next 4 bytes of the stream as a big-endian integer: :func:`byte_stream`'s,
        read a block at a time (a word never straddles two: a block is 32 bytes)."""
        at = self._at
        if at == len(self._block):
            self._block = hashlib.sha256(self._seed + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
            at = 0
        self._at = at + 4
        return int.from_bytes(self._block[at : at + 4], "big")

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``: words at or above the last whole multiple of ``n``
        are rejected, so every result is equally likely. Raise ValueError unless 0 < n < 2**32."""
        if not 0 < n < _WORD:
            raise ValueError(f"cannot draw below {n}")
        limit = _WORD - _WORD % n
        while True:
            w = self.word()
            if w < limit:
                return w % n


def seeded_deal(seed: bytes, top: int, players: int) -> SeededDeal:
    """The deal ``seed`` determines for a double-``top`` set and ``players`` seats."""
    draws = Draws(seed)
    order = list(full_set(top))  # canonical order: a fixed, sorted tuple (engine.tiles)
    for i in range(len(order) - 1, 0, -1):
        j = draws.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return SeededDeal(order=tuple(order), first_leader=draws.below(players))


def commitment(seed: bytes, salt: bytes) -> str:
    """The public commitment to a round's seed: ``SHA-256(salt ‖ seed)`` in hex."""
    return hashlib.sha256(salt + seed).hexdigest()


def split_deal(
    order: Sequence[Tile], players: int
) -> tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]:
    """The hands (each sorted, as ``RoundStarted`` records them) and the stock, front first,
    that ``order`` deals: seat k gets ``order[7k:7k+7]`` (C5)."""
    hands = tuple(tuple(sorted(order[k * HAND_SIZE : (k + 1) * HAND_SIZE])) for k in range(players))
    return hands, tuple(order[players * HAND_SIZE :])


# ---------------------------------------------------------------------------------------------
# the check of a log


def check(events: Sequence[AnyEvent], *, public: bool | None = None) -> Unfair | None:
    """The first round whose deal does not check out (F1), or None when every revealed round
    does. ``public`` checks only what a spectator sees; None decides from the log (public when
    any deal in it is hidden). A round not yet revealed is no problem: it is not checked."""
    for r in rounds(events, public=public):
        if r.problem is not None:
            return Unfair(round=r.round, message=r.problem)
    return None


def rounds(events: Sequence[AnyEvent], *, public: bool | None = None) -> list[RoundCheck]:
    """Every round's fairness, in order (see :func:`check`)."""
    if not events or not isinstance(events[0], MatchCreated):
        return [RoundCheck(round=0, commitment=None, revealed=False, problem=_NOT_A_LOG)]
    rules = events[0].rules
    if public is None:
        public = any(hidden(e) for e in events if isinstance(e, RoundStarted))
    out: list[RoundCheck] = []
    played: list[AnyEvent] = []
    start: RoundStarted | None = None
    for event in events[1:]:
        if isinstance(event, RoundStarted):
            if start is not None:  # a round that never ended: a corrupt log
                out.append(_unended(start))
            start, played = event, []
        elif isinstance(event, RoundEnded) and start is not None:
            problem = _check_round(rules, start, played, event, public)
            out.append(
                RoundCheck(
                    round=start.round, commitment=start.commitment, revealed=True, problem=problem
                )
            )
            start = None
        elif start is not None:
            played.append(event)
    if start is not None:  # the round being played: its seed is still secret
        out.append(RoundCheck(round=start.round, commitment=start.commitment, revealed=False))
    return out


_NOT_A_LOG = "the log does not open with match_created"


def hidden(event: RoundStarted) -> bool:
    """Whether the deal is hidden in ``event``: a seat's or spectator's copy (C8)."""
    return event.stock is None or any(h is None for h in event.hands)


def _unended(start: RoundStarted) -> RoundCheck:
    return RoundCheck(
        round=start.round,
        commitment=start.commitment,
        revealed=False,
        problem="the next round was dealt before this one ended",
    )


def _check_round(
    rules: Rules,
    start: RoundStarted,
    played: Sequence[AnyEvent],
    end: RoundEnded,
    public: bool,
) -> str | None:
    """What is wrong with one revealed round, or None."""
    if start.commitment is None:
        return "dealt without a commitment: nothing to check the deal against"
    if end.round != start.round:
        return f"round {start.round} is ended as round {end.round}"
    if end.seed is None or end.salt is None:
        return "the round's end does not reveal its seed and salt"
    try:
        seed = parse_hex(end.seed, SEED_BYTES, "revealed seed")
        salt = parse_hex(end.salt, SALT_BYTES, "revealed salt")
    except SeedError as e:
        return str(e)
    if commitment(seed, salt) != start.commitment:
        return (
            f"the revealed seed and salt hash to {commitment(seed, salt)[:12]}…, "
            f"not to the commitment {start.commitment[:12]}…"
        )
    n = rules.players
    deal = seeded_deal(seed, rules.top, n)
    hands, stock = split_deal(deal.order, n)
    if not public:
        problem = _check_recorded(start, end, hands, stock)
        if problem is not None:
            return problem
    if start.round == 1 and rules.family == "straight" and start.leader != deal.first_leader:
        return f"seat {start.leader} leads, but the seed draws seat {deal.first_leader} (S1)"
    return _check_play(start, played, end, hands, stock, public)


def _check_recorded(
    start: RoundStarted,
    end: RoundEnded,
    hands: tuple[tuple[Tile, ...], ...],
    stock: tuple[Tile, ...],
) -> str | None:
    """The full log: the deal recorded is exactly the seed's, and so is the secret it kept."""
    if (start.seed, start.salt) != (end.seed, end.salt):
        return "the seed and salt revealed are not the ones recorded at the deal"
    if len(start.hands) != len(hands):
        return f"{len(start.hands)} hands recorded for {len(hands)} seats"
    for seat, (recorded, seeded) in enumerate(zip(start.hands, hands, strict=True)):
        if recorded != seeded:
            return f"seat {seat} was dealt {_tiles(recorded)}, the seed deals {_tiles(seeded)}"
    if start.stock != stock:
        return f"the stock is {_tiles(start.stock)}, the seed gives {_tiles(stock)}"
    return None


def _check_play(
    start: RoundStarted,
    played: Sequence[AnyEvent],
    end: RoundEnded,
    dealt: tuple[tuple[Tile, ...], ...],
    stock: tuple[Tile, ...],
    public: bool,
) -> str | None:
    """What anyone sees: every tile played was in its seat's hand (the dealt hand and the stock
    tiles it drew, from the front), and the hands shown at the end are what is left."""
    n = len(dealt)
    if start.hand_sizes != (HAND_SIZE,) * n or start.stock_size != len(stock):
        return (
            f"hand sizes {list(start.hand_sizes)} and stock size {start.stock_size} recorded, "
            f"the seed deals {n} hands of {HAND_SIZE} and {len(stock)} in the stock"
        )
    hands = [set(h) for h in dealt]
    drawn = 0
    for event in played:
        if isinstance(event, TileDrawn):
            if not 0 <= event.seat < n:
                return f"seat {event.seat} draws, but there is no such seat"
            if drawn >= len(stock):
                return f"seat {event.seat} draws from an empty stock"
            t = stock[drawn]
            if not public and event.tile is not None and event.tile != t:
                return (
                    f"seat {event.seat} draws {format_tile(event.tile)}, "
                    f"the seed's stock gives {format_tile(t)}"
                )
            drawn += 1
            hands[event.seat].add(t)
        elif isinstance(event, TilePlayed):
            if not 0 <= event.seat < n or event.tile not in hands[event.seat]:
                return (
                    f"seat {event.seat} plays {format_tile(event.tile)}, "
                    "which the seed's deal did not give it"
                )
            hands[event.seat].remove(event.tile)
    if len(end.hands) != n:
        return f"{len(end.hands)} hands shown at the round's end for {n} seats"
    for seat, (shown, left) in enumerate(zip(end.hands, hands, strict=True)):
        if shown != tuple(sorted(left)):
            return (
                f"seat {seat} shows {_tiles(shown)} at the round's end, "
                f"the seed's deal and the moves leave {_tiles(sorted(left))}"
            )
    if end.stock is not None and end.stock != stock[drawn:]:
        return (
            f"the stock shown at the round's end is {_tiles(end.stock)}, "
            f"the seed leaves {_tiles(stock[drawn:])}"
        )
    return None


def _tiles(tiles: Sequence[Tile] | None) -> str:
    if tiles is None:
        return "hidden"
    return " ".join(format_tile(t) for t in tiles) or "nothing"
