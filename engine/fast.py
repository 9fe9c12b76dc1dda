"""The fast path: one round of either family on bit masks, for search and random playouts.

It implements the same rules as :mod:`engine.game` for a single round (the reference
semantics; rule numbers from RULES.md) and is checked against it move for move by
``tests/engine/test_fast_differential.py``. Nothing here builds events: a state is a handful
of ints and short lists, so it copies cheaply and a move costs a few table lookups.

Representation (tables are computed once per set size, :func:`tables`):

* a tile is its index in :func:`engine.tiles.full_set` (canonical order); a hand, the stock's
  remaining tiles, or any set of tiles is an ``int`` bit mask over those indexes;
* an end holds a number, or :attr:`Tables.closed` when it is not open; ``mask[n]`` is the mask
  of the tiles showing ``n`` (0 for the closed marker), so a hand's playable tiles are
  ``hand & (mask[n0] | mask[n1] | ...)``;
* a move is an ``int``: ``tile << 3 | end`` to play (``end`` 0-3 is left, right, up, down, and
  :data:`LEAD_END` leads onto the empty board), :data:`DRAW` or :data:`PASS`. Sorting plays
  by this code gives the reference order of :func:`engine.game.legal_moves`.

The round's random playout loops live in :mod:`engine.fast_playout`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from random import Random
from typing import Final

from engine.board import END_INDEX, LEAD
from engine.rules import HAND_SIZE, round5
from engine.state import MatchState
from engine.tiles import full_set, tile, weight
from events.model import DrawTile, Move, PassTurn, PlayTile
from events.vocabulary import END_NAMES, Rules, Tile

LEFT: Final = 0
RIGHT: Final = 1
UP: Final = 2
DOWN: Final = 3
LEAD_END: Final = 4
"""The end code of a lead: the first tile of a round goes on no end."""
DRAW: Final = -1
"""The move code of a draw from the boneyard (S3)."""
PASS: Final = -2
"""The move code of a pass (E1, S3)."""
SPINNER_LEAD: Final = LEAD
"""``spinner_arm`` when the spinner is the lead itself (as in :class:`engine.board.Board`)."""

CHUNK: Final = 14
"""Bits per lookup when counting a mask's pips (a 16,384-entry table per chunk)."""
CHUNK_MASK: Final = (1 << CHUNK) - 1


class Tables:
    """Everything about a double-``top`` set that the fast path looks up, computed once."""

    __slots__ = (
        "bit",
        "chunk_pips",
        "closed",
        "count",
        "double",
        "doubles",
        "full",
        "heaviest",
        "hi",
        "index",
        "lo",
        "mask",
        "next_mask",
        "other",
        "pips",
        "size",
        "tiles",
        "top",
    )

    def __init__(self, top: int) -> None:
        self.top = top
        self.tiles: tuple[Tile, ...] = full_set(top)
        self.size = len(self.tiles)
        self.index: dict[Tile, int] = {t: i for i, t in enumerate(self.tiles)}
        self.bit: tuple[int, ...] = tuple(1 << i for i in range(self.size))
        self.full = (1 << self.size) - 1
        self.lo: tuple[int, ...] = tuple(a for a, _ in self.tiles)
        self.hi: tuple[int, ...] = tuple(b for _, b in self.tiles)
        self.pips: tuple[int, ...] = tuple(a + b for a, b in self.tiles)
        self.double: tuple[bool, ...] = tuple(a == b for a, b in self.tiles)
        self.doubles = sum(self.bit[i] for i in range(self.size) if self.double[i])
        self.closed = top + 1
        mask = [0] * (top + 2)  # mask[closed] stays 0: a closed end matches nothing
        for i, (a, b) in enumerate(self.tiles):
            mask[a] |= 1 << i
            mask[b] |= 1 << i
        self.mask: tuple[int, ...] = tuple(mask)
        # other[i][n]: the half tile i leaves exposed when matched to n (-1: it does not match)
        other = []
        for a, b in self.tiles:
            row = [-1] * (top + 2)
            row[a], row[b] = b, a
            other.append(tuple(row))
        self.other: tuple[tuple[int, ...], ...] = tuple(other)
        # next_mask[mask[n] ^ bit]: the mask of the number left exposed when that tile is
        # matched to n. The key is unique: mask[n] without one tile still names n and the tile.
        self.next_mask: dict[int, int] = {}
        for i, (a, b) in enumerate(self.tiles):
            self.next_mask[mask[a] ^ (1 << i)] = mask[b]
            self.next_mask[mask[b] ^ (1 << i)] = mask[a]
        # chunk_pips[k][v]: the pips of the tiles in chunk k (CHUNK bits) of a mask showing v
        # there; two lookups count a double-six hand
        chunks = []
        for k in range((self.size + CHUNK - 1) // CHUNK):
            table = [0] * (1 << CHUNK)
            for v in range(1, 1 << CHUNK):
                low = (v & -v).bit_length() - 1
                i = k * CHUNK + low
                table[v] = table[v & (v - 1)] + (self.pips[i] if i < self.size else 0)
            chunks.append(tuple(table))
        self.chunk_pips: tuple[tuple[int, ...], ...] = tuple(chunks)
        self.count: Callable[[int], int] = _counter(self.chunk_pips)
        """The pips of a mask of tiles (C2)."""
        # E2's fallback when no double is dealt: tiles from the heaviest down
        self.heaviest: tuple[int, ...] = tuple(
            sorted(range(self.size), key=lambda i: weight(self.tiles[i]), reverse=True)
        )

    def tiles_of(self, hand: int) -> list[Tile]:
        """The tiles of a mask, in canonical order."""
        tiles = self.tiles
        out = []
        while hand:
            low = hand & -hand
            out.append(tiles[low.bit_length() - 1])
            hand ^= low
        return out

    def mask_of(self, tiles: Iterable[Tile]) -> int:
        """The mask of some tiles; raise KeyError for a tile not in the set."""
        index = self.index
        m = 0
        for t in tiles:
            m |= 1 << index[tile(*t)]
        return m


def _counter(chunks: tuple[tuple[int, ...], ...]) -> Callable[[int], int]:
    """A function counting a mask's pips by table lookups, one per chunk of the mask."""
    if len(chunks) == 2:  # double-six: a lambda with two lookups is the cheapest call
        low, high = chunks
        return lambda hand: low[hand & CHUNK_MASK] + high[hand >> CHUNK]

    def count(hand: int) -> int:
        total = 0
        for table in chunks:
            total += table[hand & CHUNK_MASK]
            hand >>= CHUNK
        return total

    return count


@cache
def tables(top: int) -> Tables:
    """The fast-path tables of the double-``top`` set (built once per set size)."""
    return Tables(top)


def move_tile(move: int) -> int:
    """The tile index a play move puts down."""
    return move >> 3


def play_move(tile_index: int, end: int) -> int:
    """The move code that plays a tile on an end (LEAD_END for the lead)."""
    return tile_index << 3 | end


def move_end(move: int) -> int:
    """The end code of a play move (0-3 left, right, up, down; 4 the lead)."""
    return move & 7


class FastIllegalMove(ValueError):
    """Raised by :meth:`FastState.apply` for a move that is not legal in the state."""


class FastState:
    """One round on bit masks: hands, stock, board ends, turn, scores, and how it ended.

    Build one with :meth:`from_deal`, :meth:`from_masks`, :meth:`from_match` or
    :meth:`random_deal`. ``apply`` checks a move against :meth:`legal_moves`;
    ``apply_unchecked`` trusts the caller (and must not be given a move once the round is
    over). Copy before trying a move you may not keep.

    Read while playing: ``turn`` (the seat to move), ``hands`` (masks by seat), ``stock`` and
    ``stock_at`` (tile indexes in drawing order, and how many are drawn), ``scores`` (by side,
    S4 points included), ``last_points`` (what the last move scored, S4), ``moves`` (made so
    far). The board mirrors :class:`engine.board.Board`: ``nums`` (each end's number, or
    ``tab.closed``), ``tips``, ``arm``, ``spinner`` (its number, -1 before one is played),
    ``spinner_arm``, ``spinner_at`` and ``board_tiles``; ``forced`` is the tile index E2 forces
    the lead to be (-1 for none). Once ``over``: ``outcome`` ("domino", "blocked" or "target",
    as ``RoundEnded.outcome``), ``winner`` (seat), ``side``, ``points`` (what the ending
    scored; 0 for "target") and ``match_over`` (C9).
    """

    __slots__ = (
        "arm",
        "board_tiles",
        "forced",
        "hands",
        "last_points",
        "leader",
        "match_over",
        "moves",
        "nums",
        "outcome",
        "partners",
        "players",
        "points",
        "rules",
        "scores",
        "side",
        "sides",
        "spinner",
        "spinner_arm",
        "spinner_at",
        "stock",
        "stock_at",
        "straight",
        "tab",
        "target",
        "tips",
        "turn",
        "winner",
    )

    rules: Rules
    tab: Tables
    players: int
    partners: bool
    straight: bool
    target: int
    sides: tuple[int, ...]
    hands: list[int]
    stock: tuple[int, ...]
    stock_at: int
    nums: list[int]
    tips: list[bool]
    arm: list[int]
    spinner: int
    spinner_arm: int
    spinner_at: int
    board_tiles: int
    turn: int
    leader: int
    forced: int
    scores: list[int]
    moves: int
    last_points: int
    outcome: str | None
    winner: int
    side: int
    points: int
    match_over: bool

    # -----------------------------------------------------------------------------------------
    # building

    @classmethod
    def _blank(cls, rules: Rules, scores: list[int] | None) -> FastState:
        s = cls.__new__(cls)
        s.rules = rules
        s.tab = tab = tables(rules.top)
        s.players = rules.players
        s.partners = rules.partners
        s.straight = rules.family == "straight"
        s.target = rules.target
        s.sides = tuple(rules.side_of(k) for k in range(rules.players))
        s.hands = [0] * rules.players
        s.stock = ()
        s.stock_at = 0
        s.nums = [tab.closed] * 4
        s.tips = [False] * 4
        s.arm = [0] * 4
        s.spinner = -1
        s.spinner_arm = SPINNER_LEAD
        s.spinner_at = 0
        s.board_tiles = 0
        s.turn = s.leader = 0
        s.forced = -1
        s.scores = [0] * rules.sides if scores is None else list(scores)
        if len(s.scores) != rules.sides:
            raise ValueError(f"{rules.sides} side scores needed, {len(s.scores)} given")
        s.moves = 0
        s.last_points = 0
        s.outcome = None
        s.winner = s.side = -1
        s.points = 0
        s.match_over = False
        return s

    @classmethod
    def from_deal(
        cls,
        rules: Rules,
        hands: Sequence[Sequence[Tile]],
        stock: Sequence[Tile],
        leader: int,
        forced_lead: Tile | None = None,
        scores: Sequence[int] | None = None,
    ) -> FastState:
        """A round about to be led: hands by seat, the stock (drawn from the front), the
        leader, the lead the first Express round forces (E2) and the sides' match scores.

        Raises ValueError if the deal does not fit the rules.
        """
        s = cls._blank(rules, None if scores is None else list(scores))
        tab = s.tab
        if len(hands) != rules.players:
            raise ValueError(f"{rules.players} hands needed, {len(hands)} given")
        if not 0 <= leader < rules.players:
            raise ValueError(f"leader {leader} is not a seat")
        seen = 0
        for k, h in enumerate(hands):
            m = tab.mask_of(h)
            if m & seen or m.bit_count() != len(h):
                raise ValueError("a tile is dealt twice")
            seen |= m
            s.hands[k] = m
        s.stock = tuple(tab.index[tile(*t)] for t in stock)
        if len(set(s.stock)) != len(s.stock) or tab.mask_of(stock) & seen:
            raise ValueError("a tile is dealt twice")
        s.turn = s.leader = leader
        if forced_lead is not None:
            f = tab.index[tile(*forced_lead)]
            if not s.hands[leader] >> f & 1:
                raise ValueError("the leader does not hold the forced lead")
            s.forced = f
        return s

    @classmethod
    def from_masks(
        cls,
        rules: Rules,
        hands: list[int],
        stock: int | Sequence[int],
        leader: int,
        forced: int = -1,
        scores: Sequence[int] | None = None,
    ) -> FastState:
        """A round about to be led, from hand masks and the stock (tile indexes in drawing
        order, or a mask when the order does not matter, as in Express); no checks."""
        s = cls._blank(rules, None if scores is None else list(scores))
        s.hands = hands
        s.stock = tuple(_indexes(stock)) if isinstance(stock, int) else tuple(stock)
        s.turn = s.leader = leader
        s.forced = forced
        return s

    @classmethod
    def from_match(cls, state: MatchState) -> FastState:
        """The round a reference state is playing, board and all, to search from there.

        Raises ValueError unless the state's phase is ``playing``.
        """
        if state.phase != "playing":
            raise ValueError(f"no round is being played (phase {state.phase!r})")
        s = cls._blank(state.rules, state.scores)
        tab = s.tab
        s.hands = [tab.mask_of(h) for h in state.hands]
        s.stock = tuple(tab.index[t] for t in state.stock)
        s.turn = state.turn
        s.leader = state.leader
        s.forced = -1 if state.forced_lead is None else tab.index[state.forced_lead]
        board = state.board
        s.nums = [tab.closed if n is None else n for n in board.numbers]
        s.tips = list(board.tips)
        s.arm = list(board.arm_len)
        s.spinner = -1 if board.spinner is None else board.spinner[0]
        s.spinner_arm = board.spinner_arm
        s.spinner_at = board.spinner_at
        s.board_tiles = board.tiles
        return s

    @classmethod
    def random_deal(
        cls,
        rules: Rules,
        rng: Random,
        leader: int | None = None,
        scores: Sequence[int] | None = None,
    ) -> FastState:
        """A freshly shuffled round. With ``leader`` None it is a match's first round: Express
        forces E2's lead, Straight draws the leader at random (S1); else ``leader`` leads any
        tile."""
        s = cls._blank(rules, None if scores is None else list(scores))
        order = random_order(s.tab, rng)
        n = rules.players
        bit = s.tab.bit
        for k in range(n):
            m = 0
            for i in order[k * HAND_SIZE : (k + 1) * HAND_SIZE]:
                m |= bit[i]
            s.hands[k] = m
        s.stock = tuple(order[n * HAND_SIZE :])
        if leader is None and not s.straight:
            s.leader, s.forced = first_express_lead(s.tab, s.hands)
        elif leader is None:
            s.leader = int(rng.random() * n)
        elif 0 <= leader < n:
            s.leader = leader
        else:
            raise ValueError(f"leader {leader} is not a seat")
        s.turn = s.leader
        return s

    def copy(self) -> FastState:
        """An independent copy (tables, rules and the stock order are shared)."""
        s = FastState.__new__(FastState)
        s.rules = self.rules
        s.tab = self.tab
        s.players = self.players
        s.partners = self.partners
        s.straight = self.straight
        s.target = self.target
        s.sides = self.sides
        s.hands = self.hands[:]
        s.stock = self.stock
        s.stock_at = self.stock_at
        s.nums = self.nums[:]
        s.tips = self.tips[:]
        s.arm = self.arm[:]
        s.spinner = self.spinner
        s.spinner_arm = self.spinner_arm
        s.spinner_at = self.spinner_at
        s.board_tiles = self.board_tiles
        s.turn = self.turn
        s.leader = self.leader
        s.forced = self.forced
        s.scores = self.scores[:]
        s.moves = self.moves
        s.last_points = self.last_points
        s.outcome = self.outcome
        s.winner = self.winner
        s.side = self.side
        s.points = self.points
        s.match_over = self.match_over
        return s

    # -----------------------------------------------------------------------------------------
    # reading

    @property
    def over(self) -> bool:
        """The round has ended (domino, blocked, or the target reached mid-round)."""
        return self.outcome is not None

    @property
    def stock_left(self) -> int:
        """Tiles still in the stock (the boneyard in Straight)."""
        return len(self.stock) - self.stock_at

    def counts(self) -> list[int]:
        """Each seat's pips in hand (C2)."""
        count = self.tab.count
        return [count(h) for h in self.hands]

    def hand(self, seat: int) -> list[Tile]:
        """A seat's tiles in canonical order."""
        return self.tab.tiles_of(self.hands[seat])

    def ends(self) -> list[int | None]:
        """The four ends' numbers (left, right, up, down), None where not open."""
        closed = self.tab.closed
        return [None if n == closed else n for n in self.nums]

    def board_count(self) -> int:
        """The all-fives count of the open ends (S4), as ``Board.count`` computes it."""
        nums, tips = self.nums, self.tips
        if self.board_tiles == 0:
            return 0
        if self.board_tiles == 1:
            return nums[LEFT] + nums[RIGHT]
        total = (2 * nums[LEFT] if tips[LEFT] else nums[LEFT]) + (
            2 * nums[RIGHT] if tips[RIGHT] else nums[RIGHT]
        )
        if nums[UP] != self.tab.closed:
            for e in (UP, DOWN):
                if self.arm[e]:
                    total += 2 * nums[e] if tips[e] else nums[e]
        return total

    def _open_mask(self) -> int:
        mask, nums = self.tab.mask, self.nums
        return mask[nums[0]] | mask[nums[1]] | mask[nums[2]] | mask[nums[3]]

    def can_play(self, seat: int) -> bool:
        """Whether the seat holds a tile it could play now."""
        if self.board_tiles == 0:
            return True
        return bool(self.hands[seat] & self._open_mask())

    def legal_moves(self) -> list[int]:
        """The mover's legal moves in the reference order (engine.game.legal_moves): tiles in
        canonical order, each on its ends left, right, up, down; else the draw, else the pass."""
        if self.outcome is not None:
            return []
        h = self.hands[self.turn]
        if self.board_tiles == 0:
            if self.forced >= 0:
                return [self.forced << 3 | LEAD_END]
            return [i << 3 | LEAD_END for i in _indexes(h)]
        mask = self.tab.mask
        per_end = [h & mask[n] for n in self.nums]
        playable = per_end[0] | per_end[1] | per_end[2] | per_end[3]
        if playable:
            moves = []
            for i in _indexes(playable):
                b = 1 << i
                for e in range(4):
                    if per_end[e] & b:
                        moves.append(i << 3 | e)
            return moves
        if self.straight and self.stock_at < len(self.stock):
            return [DRAW]
        return [PASS]

    def is_legal(self, move: int) -> bool:
        """Whether ``move`` is one of :meth:`legal_moves`."""
        return move in self.legal_moves()

    # -----------------------------------------------------------------------------------------
    # moving

    def apply(self, move: int) -> None:
        """Make a legal move; raise FastIllegalMove, naming the move and state, if it is not."""
        if not self.is_legal(move):
            raise FastIllegalMove(
                f"{self.describe(move)} is not legal for seat {self.turn} in {self!r}"
            )
        self.apply_unchecked(move)

    def apply_unchecked(self, move: int) -> None:
        """Make a move without checking that it is legal."""
        if move >= 0:
            self.play_unchecked(move >> 3, move & 7)
        elif move == DRAW:
            self.draw_unchecked()
        else:
            self.pass_unchecked()

    def pass_unchecked(self) -> None:
        """Pass the turn without checking that the mover can neither play nor draw."""
        self.moves += 1
        self.last_points = 0
        self.turn = (self.turn + 1) % self.players

    def draw_unchecked(self) -> None:
        """Draw the stock's front tile without checking S3; the mover keeps the turn.

        The draw that empties the boneyard blocks the round if nobody can play (C10).
        """
        self.moves += 1
        self.last_points = 0
        self.hands[self.turn] |= 1 << self.stock[self.stock_at]
        self.stock_at += 1
        if self.stock_at == len(self.stock) and not self._anyone_can_play():
            self._blocked()

    def play_unchecked(self, i: int, end: int) -> None:
        """Play tile ``i`` on ``end`` (LEAD_END for the lead) without checking it fits."""
        tab = self.tab
        seat = self.turn
        self.moves += 1
        self.hands[seat] &= ~(1 << i)
        nums, tips, arm = self.nums, self.tips, self.arm
        double = tab.double[i]
        if end == LEAD_END:
            nums[LEFT] = tab.lo[i]
            nums[RIGHT] = tab.hi[i]
            tips[LEFT] = tips[RIGHT] = double
            self.board_tiles = 1
            if self.straight and double:
                self.spinner = tab.lo[i]
                self.spinner_arm = SPINNER_LEAD
        else:
            nums[end] = tab.other[i][nums[end]]
            tips[end] = double
            arm[end] += 1
            self.board_tiles += 1
            if self.straight:
                if self.spinner < 0:
                    if double:  # S2: the first double played is the spinner
                        self.spinner = tab.lo[i]
                        self.spinner_arm = end
                        self.spinner_at = arm[end]
                elif nums[UP] == tab.closed and (
                    arm[LEFT] > 0 and arm[RIGHT] > 0
                    if self.spinner_arm == SPINNER_LEAD
                    else arm[self.spinner_arm] > self.spinner_at
                ):
                    nums[UP] = nums[DOWN] = self.spinner  # S2: its crosswise sides open
        self.forced = -1
        points = 0
        if self.straight:
            c = self.board_count()
            if c > 0 and c % 5 == 0:
                points = c  # S4
        self.last_points = points
        side = self.sides[seat]
        self.scores[side] += points
        if points and self.scores[side] >= self.target:  # C9: the match ends mid-round
            self._end("target", seat, side, 0)
            self.match_over = True
        elif not self.hands[seat]:
            self._domino(seat)
        elif not (self.straight and self.stock_at < len(self.stock)) and not (
            self._anyone_can_play()
        ):
            self._blocked()  # C10
        else:
            self.turn = (seat + 1) % self.players

    def _anyone_can_play(self) -> bool:
        open_mask = self._open_mask()
        return any(h & open_mask for h in self.hands)

    def _end(self, outcome: str, winner: int, side: int, points: int) -> None:
        self.outcome = outcome
        self.winner = winner
        self.side = side
        self.points = points

    def _domino(self, seat: int) -> None:
        side = self.sides[seat]
        counts = self.counts()
        if self.straight:  # S5: the opponents' counts, partners' not included, rounded
            points = round5(sum(c for k, c in enumerate(counts) if self.sides[k] != side))
        else:  # E4: the opponents' counts; with pairs, all four hands
            points = sum(counts)
        self._score("domino", seat, side, points)

    def _blocked(self) -> None:
        winner, side, points = blocked_score(
            self.counts(), self.sides, self.leader, self.straight, self.partners
        )
        self._score("blocked", winner, side, points)

    def _score(self, outcome: str, winner: int, side: int, points: int) -> None:
        self._end(outcome, winner, side, points)
        self.scores[side] += points
        self.match_over = self.scores[side] >= self.target  # C9

    # -----------------------------------------------------------------------------------------
    # converting

    def describe(self, move: int) -> str:
        """A move in words, e.g. ``5-3 left``, ``6-6 lead``, ``draw``, ``pass``."""
        if move == DRAW:
            return "draw"
        if move == PASS:
            return "pass"
        if move < 0 or move >> 3 >= self.tab.size or move & 7 > LEAD_END:
            return f"move code {move}"
        a, b = self.tab.tiles[move >> 3]
        end = "lead" if move & 7 == LEAD_END else END_NAMES[move & 7]
        return f"{a}-{b} {end}"

    def to_command(self, move: int) -> Move:
        """The reference command for a move by the seat to move."""
        seat = self.turn
        if move == DRAW:
            return DrawTile(seat=seat)
        if move == PASS:
            return PassTurn(seat=seat)
        end = move & 7
        return PlayTile(
            seat=seat,
            tile=self.tab.tiles[move >> 3],
            end=None if end == LEAD_END else END_NAMES[end],
        )

    def from_command(self, command: Move) -> int:
        """The move code of a reference command; raise KeyError for a tile not in the set."""
        if isinstance(command, DrawTile):
            return DRAW
        if isinstance(command, PassTurn):
            return PASS
        i = self.tab.index[tile(*command.tile)]
        return i << 3 | (LEAD_END if command.end is None else END_INDEX[command.end])

    def __repr__(self) -> str:
        ends = "/".join("-" if n is None else str(n) for n in self.ends())
        hands = " ".join(
            f"{k}:" + ",".join(f"{a}{b}" for a, b in self.hand(k)) for k in range(self.players)
        )
        return (
            f"<FastState {self.rules.family} turn={self.turn} ends={ends} hands={hands} "
            f"stock={self.stock_left} scores={self.scores} outcome={self.outcome}>"
        )


def perft(state: FastState, depth: int) -> int:
    """Count the move sequences of ``depth`` moves from ``state`` (a round that ends sooner
    counts once): the golden numbers of a move generator, as in chess engines."""
    if depth == 0 or state.outcome is not None:
        return 1
    moves = state.legal_moves()
    if depth == 1:
        return len(moves)
    total = 0
    for move in moves:
        child = state.copy()
        child.apply_unchecked(move)
        total += perft(child, depth - 1)
    return total


def _indexes(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def blocked_score(
    counts: Sequence[int], sides: Sequence[int], leader: int, straight: bool, partners: bool
) -> tuple[int, int, int]:
    """E5/S6 for a blocked round: (winning seat, side, points). The side with the lowest count
    wins, ties to the side nearest the hand (C7); its lowest hand, ties by C7, is the winner
    (E3). ``sides`` is each seat's side: seat % 2 with partners, else the seat."""
    if partners:
        even = counts[0] + counts[2]
        odd = counts[1] + counts[3]
        # a tie goes to the hand's own side, the nearest of all
        side = 0 if even < odd else 1 if odd < even else sides[leader]
        first, second = (side, side + 2) if (side - leader) % 4 < 2 else (side + 2, side)
        winner = second if counts[second] < counts[first] else first
        opponents = odd if side == 0 else even
        if straight:
            return winner, side, round5(opponents)  # S6: partners' counts not included
        return winner, side, even + odd  # E5: pairs score all four hands
    n = len(counts)
    low = min(counts)
    winner = leader
    while counts[winner] != low:  # the first lowest from the hand onwards (C7)
        winner = (winner + 1) % n
    opponents = sum(counts) - low
    return winner, sides[winner], round5(opponents) if straight else opponents  # S6, E5


def first_express_lead(tab: Tables, hands: list[int]) -> tuple[int, int]:
    """E2: (seat, tile) of the highest double dealt, or with no double the heaviest tile."""
    dealt = 0
    for h in hands:
        dealt |= h
    doubles = dealt & tab.doubles
    # doubles grow with their index in canonical order
    i = doubles.bit_length() - 1 if doubles else next(i for i in tab.heaviest if dealt >> i & 1)
    seat = next(k for k, h in enumerate(hands) if h >> i & 1)
    return seat, i


# ---------------------------------------------------------------------------------------------
# shuffling


@cache
def _order_lanes(size: int) -> tuple[int, int, struct.Struct]:
    """Constants for :func:`random_order`: one float lane per tile in [1, 2), tile in the low
    byte of the mantissa."""
    keep = ((1 << 52) - 1) ^ 0xFF  # random mantissa bits above the low byte
    one = 0x3FF << 52  # the exponent of [1, 2)
    keep_all = lanes = 0
    for k in range(size):
        keep_all |= keep << (64 * k)
        lanes |= (one | k) << (64 * k)
    return keep_all, lanes, struct.Struct(f"<{size}d")


def random_order(tab: Tables, rng: Random) -> bytes:
    """A uniformly random permutation of the set's tile indexes, as bytes.

    Sorting random keys is a shuffle done in C: each tile gets a float in [1, 2) with 44
    random bits and its index in the low byte of the mantissa; sorting the floats orders the
    tiles at random (ties, at odds of about 1 in 10^10 per deal, are the only bias).
    """
    keep, lanes, codec = _order_lanes(tab.size)
    n = tab.size
    keys = sorted(
        codec.unpack(((rng.getrandbits(64 * n) & keep) | lanes).to_bytes(8 * n, "little"))
    )
    return codec.pack(*keys)[::8]
