"""The match's language as a bot reads it: tiles, rules, moves and events, exactly as the gateway
encodes them (JSON objects tagged by ``type``; docs/protocol.md).

A tile is a pair of pips ``(low, high)`` as dealt; an end is where a tile may go. The events are
the match log's, redacted for their reader: another seat's hand and drawn tile are ``None``.
An event of a type this SDK does not know — a newer server's — is read as
:class:`UnknownEvent`, so an older bot keeps playing.

The structs are the server's, generated into :mod:`domino_sdk.wire` from the protocol's
recorded schema (``make schema``); what is written here is what a bot needs to know of them.
"""

from __future__ import annotations

from typing import Literal

from domino_sdk import base, wire

Tile = base.Tile
"""A tile: its two halves' pips, e.g. ``(3, 5)``."""

Hand = tuple[Tile, ...]

End = base.End
"""An open end: the line's two arms, and the spinner's crosswise sides (Straight, S2)."""

Family = Literal["express", "straight"]
NextLeader = Literal["after_winner", "rotate"]
Outcome = Literal["domino", "blocked", "target", "resigned", "forfeit", "aborted", "cancelled"]
"""How a round ended; the last four end the match in the middle of a round (every hand shown)."""
EndReason = Literal["target", "resigned", "forfeit", "rounds", "aborted", "cancelled"]
"""Why a match ended: a side reached the target, a seat resigned, a seat timed out
``forfeit_after`` turns in a row, the last of ``max_rounds`` rounds was played, a seat aborted
before its side moved, or the operator cancelled it. Aborted and cancelled matches have no
winner."""

Rules = wire.Rules
"""A match's rules (RULES.md): ``family``, ``players`` (C3), ``partners`` (C3: seats 0 and 2
against 1 and 3), ``top`` (C1: the set's highest double), ``target`` (E6 / S7),
``next_leader`` (E3, Express only) and ``reveal_stock`` (C8: whether a round's end shows the
stock); ``sides`` is how many scoring sides, ``side_of(seat)`` the side a seat scores for."""

# -- moves: what ``view.legal`` lists, and what a bot posts ------------------------------------

PlayTile = wire.PlayTile
"""Play ``tile`` from the seat's hand on ``end`` (None for the lead)."""
DrawTile = wire.DrawTile
"""Draw one tile from the boneyard (Straight only, S3)."""
PassTurn = wire.PassTurn
"""Pass: allowed only with no legal play and nothing to draw (E1, S3)."""
Move = wire.Move
"""A move a seat makes on its turn."""

# -- events ------------------------------------------------------------------------------------

Event = base.Event
"""Base of every event: something that happened in the match."""
MatchCreated = wire.MatchCreated
"""A match opened: its rules, and by seat the players' names, house bot pools (``bots``;
None: a seat played from outside) and accounts (None: a house bot or a guest). A seat that
times out ``forfeit_after`` turns in a row forfeits (0: never); the match ends after
``max_rounds`` rounds (0: no cap); ``deadline_ms`` is each turn's limit."""
RoundStarted = wire.RoundStarted
"""A round was dealt: the reader's own hand is shown, every other hand and the stock are
None; ``forced_lead`` is the first round's forced lead (E2). ``commitment`` binds the referee
to the deal's secret seed before anyone moves; the seed and salt are None until
``RoundEnded`` reveals them (F1, :mod:`domino_sdk.fairness`)."""
TilePlayed = wire.TilePlayed
"""A tile went on the line; ``points`` is what the play scored (S4), 0 in Express."""
TileDrawn = wire.TileDrawn
"""A seat drew from the boneyard; ``tile`` is None unless the reader drew it."""
TurnPassed = wire.TurnPassed
"""A seat passed, holding no playable tile with nothing left to draw."""
TurnTimedOut = wire.TurnTimedOut
"""A seat's deadline passed; the default move made for it follows."""
RoundEnded = wire.RoundEnded
"""A round ended: how (``outcome``), who won it (``winner``: the seat that dominoed, or the
winning side's lowest hand, E3), the ``side`` that scored and its ``points``, each seat's pips
left (``counts``), every hand shown (C8), the stock only with ``reveal_stock``, every side's
match score after it (``scores``); ``seed`` and ``salt`` reveal the deal's secret, so anyone
can check it (F1)."""
MatchEnded = wire.MatchEnded
"""The match is over: how it ended (``reason``), the winning side (``winner``; None: aborted
or cancelled), the scores by side, and the seat that resigned, forfeited or aborted."""

AnyEvent = wire.AnyEvent
"""Every event type this SDK knows."""
UnknownEvent = base.UnknownEvent
"""An event of a type this SDK does not know, from a newer server: ``name`` is its ``type``
on the wire and ``fields`` the rest of it, as plain JSON. Nothing on the wire carries this
tag; :func:`domino_sdk.protocol.decode_event` makes one."""
SeenEvent = wire.SeenEvent
"""An event as a bot receives it: one this SDK knows, or an :class:`UnknownEvent`."""
