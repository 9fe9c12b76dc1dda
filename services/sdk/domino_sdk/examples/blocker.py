"""Blocker: leave the next player ends it cannot match.

A seat's view carries, by seat, the numbers that seat is known to hold none of (``voids``:
shown by its passes and draws). Blocker prefers the play after which the next opponent is
void in as many open ends as possible; ties go to points now, then to the heavier tile.

    python -m domino_sdk.examples.blocker --url http://127.0.0.1:8080 --token TOKEN
"""

from __future__ import annotations

import sys

from domino_sdk import Bot, Move, PlayTile, View


class Blocker(Bot):
    """Starve the next opponent; then points; then the heaviest tile."""

    name = "blocker"

    def choose(self, view: View) -> Move:
        """The play leaving the next opponent the fewest ends it can match."""
        seat = view.seat
        if seat is None:  # a spectator's view: never asked for a move, nothing to block
            return view.legal[0]
        nxt = (seat + 1) % len(view.hand_sizes)
        if view.rules.partners and len(view.hand_sizes) == 4 and view.hand_sizes[nxt] == 0:
            nxt = (nxt + 1) % 4
        void = set(view.voids[nxt])
        ends = {e.end: e.number for e in view.ends}

        def key(pair: tuple[Move, int]) -> tuple[int, int, int]:
            move, points = pair
            if not isinstance(move, PlayTile):
                return (-1, 0, 0)
            after = dict(ends)
            a, b = move.tile
            if move.end is None:  # the lead: both halves are open ends
                shown = [a, b]
            else:
                number = after[move.end]
                after[move.end] = b if a == number else a
                shown = list(after.values())
            blocked = sum(n in void for n in shown)
            return (blocked, points, a + b)

        return max(zip(view.legal, view.legal_points, strict=True), key=key)[0]


if __name__ == "__main__":
    from domino_sdk.examples._main import main

    sys.exit(main(Blocker()))
