"""The gateway's resources: a module each, holding its handlers and declaring its operations
once (``OPERATIONS``, services/gateway/declare.py), from which create_app builds the routes and
services/gateway/openapi.py the document. The code for a URL is in the module of its prefix
(every API path begins with /api/v1):

=================================================  =====================================
URL (after /api/v1)                                module
=================================================  =====================================
/matches, /matches/{id}, .../join                  :mod:`.matches`
/matches/{id}/seats/{seat}/stream, .../moves,      :mod:`.seats`
.../socket (a WebSocket); /seat
/matches/{id}/stream, /matches/{id}/replay         :mod:`.spectators`
/accounts..., /account, /account/token,            :mod:`.accounts`
/account/stream, /account/play
/account/socket (a WebSocket), and the account     :mod:`.channel`
channel of /account/stream?play=1
/challenges...                                     :mod:`.challenges`
/seeks...                                          :mod:`.seeks`
/arenas...                                         :mod:`.arenas`
/ratings, /players/{key}                           :mod:`.players`
/openapi.json; /healthz, /readyz, /metrics         :mod:`.operations`
=================================================  =====================================

What they share — the tokens, the places a stream takes, the send/await of commands, a seat's
move (``play_move``), a match's feed (``feed_from``) — is the gateway's
(services/gateway/core.py and commands.py).
"""

from __future__ import annotations

from services.gateway.declare import Operation
from services.gateway.resources import (
    accounts,
    arenas,
    challenges,
    channel,
    matches,
    operations,
    players,
    seats,
    seeks,
    spectators,
)

OPERATIONS: tuple[Operation, ...] = (
    *matches.OPERATIONS,
    *seats.OPERATIONS,
    *spectators.OPERATIONS,
    *players.OPERATIONS,
    *operations.OPERATIONS,
    *accounts.OPERATIONS,
    *channel.OPERATIONS,
    *challenges.OPERATIONS,
    *seeks.OPERATIONS,
    *arenas.OPERATIONS,
)
"""Every operation of the gateway, in the order its document lists them."""
