"""The rule set of a match (RULES.md) and the engine's fixed numbers.

``Rules`` — every option named, with its default and its validation — is stored whole in the
match's first event, so it is part of the schema and lives in :mod:`events.vocabulary`; it is
re-exported here, where the engine's readers look for it.
"""

from __future__ import annotations

from events.vocabulary import DEFAULT_TARGET as DEFAULT_TARGET
from events.vocabulary import Family as Family
from events.vocabulary import NextLeader as NextLeader
from events.vocabulary import Rules as Rules
from events.vocabulary import RulesError as RulesError

HAND_SIZE = 7
"""Tiles dealt to each player (C5)."""


def round5(points: int) -> int:
    """Round to the nearest multiple of 5: remainders 1-2 down, 3-4 up (S5)."""
    r = points % 5
    return points - r if r <= 2 else points + 5 - r
