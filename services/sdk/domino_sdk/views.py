"""What a seat may know of its match at one version (rule C8), as the gateway sends it.

A seat sees its own hand, every tile on the table, how many tiles each player holds and how
many are in the stock, and — what anyone at the table could work out — the numbers each seat
is known to lack. Every hand is shown once a round has ended (``last_round``). On its turn,
``legal`` lists the seat's moves, exactly as it may post them. A spectator's view has ``seat``
and ``hand`` None and never a legal move.

The structs are the server's, generated into :mod:`domino_sdk.wire` (``make schema``).
"""

from __future__ import annotations

from typing import Literal

from domino_sdk import wire

Phase = Literal["dealing", "playing", "over"]

OpenEnd = wire.OpenEnd
"""An end a tile may be played on: its name (``end``), the ``number`` it shows, whether a
crosswise ``double`` lies there (S4 counts both halves), and how many ``tiles`` its arm holds
beyond the lead."""

View = wire.View
"""A seat's (or, with ``seat`` None, a spectator's) view of a match at ``version``: the
``rules``, the ``players``' names by seat, the ``phase``, ``round``, ``leader`` and ``turn``
(the seat to move while a round is on), ``scores`` by side (``Rules.side_of``), the open
``ends`` and the ``spinner``, this seat's ``hand`` (None for a spectator), ``hand_sizes`` and
``stock_size``, the tiles ``played`` this round in order, ``voids`` (by seat, the numbers it
is known to hold none of), ``legal`` (the seat's moves when it is its turn, else empty) with
``legal_points`` (what each would score now, S4), ``last_round`` and the match's ``result``."""
