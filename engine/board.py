"""The line of play: open ends, crosswise doubles, the spinner, and all-fives counting.

Ends are numbered in a fixed order — left, right, up, down — which is also the order of legal
moves. ``left`` and ``right`` are the two long arms; ``up`` and ``down`` are the spinner's
crosswise sides (S2), which open only once both of its long sides carry a tile.
"""

from __future__ import annotations

from engine.tiles import format_tile, is_double, other_half
from events.vocabulary import END_NAMES as END_NAMES  # the schema's words: events.vocabulary
from events.vocabulary import End as End
from events.vocabulary import Tile

LEFT, RIGHT, UP, DOWN = 0, 1, 2, 3
END_INDEX = {name: i for i, name in enumerate(END_NAMES)}
LEAD = -1  # spinner_arm when the spinner is the lead itself


class Board:
    """Mutable board of one round; ``copy()`` before trying a move you may not keep."""

    __slots__ = ("arm_len", "numbers", "spinner", "spinner_arm", "spinner_at", "tiles", "tips")

    def __init__(self) -> None:
        self.numbers: list[int | None] = [None, None, None, None]  # exposed number, None=closed
        self.tips: list[bool] = [False, False, False, False]  # tip tile is a crosswise double
        self.arm_len: list[int] = [0, 0, 0, 0]  # tiles on each arm, the lead excluded
        self.spinner: Tile | None = None
        self.spinner_arm: int = LEAD
        self.spinner_at: int = 0
        self.tiles: int = 0

    def copy(self) -> Board:
        """An independent copy of this board."""
        b = Board.__new__(Board)
        b.numbers = self.numbers[:]
        b.tips = self.tips[:]
        b.arm_len = self.arm_len[:]
        b.spinner = self.spinner
        b.spinner_arm = self.spinner_arm
        b.spinner_at = self.spinner_at
        b.tiles = self.tiles
        return b

    @property
    def empty(self) -> bool:
        """No tile has been played this round."""
        return self.tiles == 0

    def ends_for(self, t: Tile) -> list[int]:
        """The ends ``t`` matches, in fixed order (one move per end, C6)."""
        a, b = t
        return [i for i, n in enumerate(self.numbers) if n is not None and n in (a, b)]

    def lead(self, t: Tile, spinners: bool) -> None:
        """Place the first tile; with ``spinners`` (Straight) a double lead is the spinner."""
        self.numbers[LEFT], self.numbers[RIGHT] = t
        self.tips[LEFT] = self.tips[RIGHT] = is_double(t)
        self.tiles = 1
        if spinners and is_double(t):
            self.spinner = t
            self.spinner_arm = LEAD

    def place(self, t: Tile, end: int, spinners: bool) -> None:
        """Play ``t`` on ``end``; the caller has checked that it matches.

        Raises ValueError if ``end`` is closed.
        """
        number = self.numbers[end]
        if number is None:
            raise ValueError(f"cannot place {format_tile(t)}: the {END_NAMES[end]} end is closed")
        self.numbers[end] = other_half(t, number)
        double = t[0] == t[1]
        self.tips[end] = double
        self.arm_len[end] += 1
        self.tiles += 1
        if not spinners:
            return
        if self.spinner is None:
            if double:  # S2: the first double played is the spinner
                self.spinner = t
                self.spinner_arm = end
                self.spinner_at = self.arm_len[end]
        elif self.numbers[UP] is None and self._spinner_covered():
            n = self.spinner[0]
            self.numbers[UP] = self.numbers[DOWN] = n

    def _spinner_covered(self) -> bool:
        """Both long sides of the spinner carry a tile (S2)."""
        if self.spinner_arm == LEAD:
            return self.arm_len[LEFT] > 0 and self.arm_len[RIGHT] > 0
        return self.arm_len[self.spinner_arm] > self.spinner_at

    def count(self) -> int:
        """The all-fives count of the open ends (S4).

        An end whose tip is a crosswise double counts both halves; the spinner's crosswise
        sides count 0 until a tile lies there; a lone lead counts its pips once.
        """
        numbers, tips, arm_len = self.numbers, self.tips, self.arm_len
        left, right = numbers[LEFT], numbers[RIGHT]
        if left is None or right is None:  # the long arms open with the lead: an empty board
            return 0
        if self.tiles == 1:
            return left + right
        total = (2 * left if tips[LEFT] else left) + (2 * right if tips[RIGHT] else right)
        up, down = numbers[UP], numbers[DOWN]
        if up is not None and arm_len[UP]:
            total += 2 * up if tips[UP] else up
        if down is not None and arm_len[DOWN]:
            total += 2 * down if tips[DOWN] else down
        return total
