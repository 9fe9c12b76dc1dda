"""Heaviest: score what it can now, else get rid of the heaviest tile.

The shortest useful bot: in Straight it takes the most all-fives points on offer (S4); in
Express, or when nothing scores, it plays its heaviest tile so a blocked round costs it less
(E5, S6). With no play it draws or passes, as ``view.legal`` says.

    python -m domino_sdk.examples.heaviest --url http://127.0.0.1:8080 --token TOKEN
"""

from __future__ import annotations

import sys

from domino_sdk import Bot, Move, PlayTile, View


class Heaviest(Bot):
    """Most points now, then the heaviest tile."""

    name = "heaviest"

    def choose(self, view: View) -> Move:
        """The legal move scoring most, then the one with the most pips."""

        def key(pair: tuple[Move, int]) -> tuple[int, int]:
            move, points = pair
            pips = sum(move.tile) if isinstance(move, PlayTile) else -1
            return points, pips

        return max(zip(view.legal, view.legal_points, strict=True), key=key)[0]


if __name__ == "__main__":
    from domino_sdk.examples._main import main

    sys.exit(main(Heaviest()))
