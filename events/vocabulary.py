"""The words the schema is written in: tiles, ends, phases and a match's rule set.

Commands, events, views and wire messages carry these types, and the engine computes with them.
They live here, below the engine, so that the stored language depends on nothing else; the
engine re-exports each from the module that works with it (``engine.tiles``, ``engine.board``,
``engine.rules``, ``engine.state``).
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

POOL_NAME = re.compile(r"[a-z0-9_\-]{1,32}")
"""What a pool of house bots may be called (it names a turns stream: no braces or spaces)."""

ACCOUNT_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")
"""What an account id may be (it keys results and ratings: no colon, so never ``house:<pool>``)."""

Tile = tuple[int, int]
"""A tile as ``(low, high)`` with ``low <= high``; every tile in the engine is normalized."""

SET_SIZES = (6, 9, 12)
"""The double-N sets a match may use (C1)."""

End = Literal["left", "right", "up", "down"]
"""An open end of the line: the two long arms, and the spinner's crosswise sides (S2)."""

END_NAMES: tuple[End, ...] = ("left", "right", "up", "down")
"""Every end, in the fixed order that is also the order of legal moves."""

Phase = Literal["dealing", "playing", "over"]
"""``dealing``: waiting for the next deal; ``playing``: a round is on; ``over``: match ended."""

Family = Literal["express", "straight"]
NextLeader = Literal["after_winner", "rotate"]

DEFAULT_TARGET: dict[str, int] = {"express": 100, "straight": 250}  # E6, S7


class RulesError(ValueError):
    """Raised when a rule set names an impossible combination of options; ``rule`` is the rule
    of RULES.md it breaks ("-" when none names the option)."""

    def __init__(self, message: str, rule: str = "-") -> None:
        super().__init__(message)
        self.rule = rule


class Rules(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A match's rules as data; stored whole in the match's first event.

    Build one with :meth:`Rules.make`, which fills the family's defaults and validates.
    """

    family: Family = "express"
    players: int = 4  # C3
    partners: bool = True  # C3: default on for Express, off for Straight
    top: int = 6  # C1: double-six set
    target: int = 100  # E6 / S7
    next_leader: NextLeader = "after_winner"  # E3 (Express only)
    reveal_stock: bool = False  # C8

    @classmethod
    def make(
        cls,
        family: Family = "express",
        *,
        players: int = 4,
        partners: bool | None = None,
        top: int = 6,
        target: int | None = None,
        next_leader: NextLeader = "after_winner",
        reveal_stock: bool = False,
    ) -> Rules:
        """Build a validated rule set, taking the family's default where an option is None.

        Raises RulesError if the options cannot make a match (an unknown family included).
        """
        if family not in DEFAULT_TARGET:
            raise RulesError(f"unknown family {family!r}: use express or straight")
        if partners is None:
            partners = family == "express" and players == 4
        rules = cls(
            family=family,
            players=players,
            partners=partners,
            top=top,
            target=DEFAULT_TARGET[family] if target is None else target,
            next_leader=next_leader,
            reveal_stock=reveal_stock,
        )
        rules.validate()
        return rules

    def validate(self) -> None:
        """Raise RulesError if the options cannot make a match."""
        if self.family not in DEFAULT_TARGET:
            raise RulesError(f"unknown family {self.family!r}: use express or straight")
        if self.players not in (2, 3, 4):
            raise RulesError(f"players must be 2, 3 or 4 (C3), not {self.players}", "C3")
        if self.partners and self.players != 4:
            raise RulesError("partners needs exactly 4 players (C3)", "C3")
        if self.top not in SET_SIZES:
            raise RulesError(
                f"set must be double-6, double-9 or double-12 (C1), not {self.top}", "C1"
            )
        if not 0 < self.target <= 1_000_000:
            raise RulesError(
                f"target must be a positive number of points, not {self.target}",
                "E6" if self.family == "express" else "S7",
            )
        if self.next_leader not in ("after_winner", "rotate"):
            raise RulesError(f"next_leader must be after_winner or rotate, not {self.next_leader}")

    @property
    def sides(self) -> int:
        """How many scoring sides: 2 with partners, else one per player."""
        return 2 if self.partners else self.players

    def side_of(self, seat: int) -> int:
        """The side a seat scores for: seats 0 and 2, and 1 and 3, with partners (C3)."""
        return seat % 2 if self.partners else seat
