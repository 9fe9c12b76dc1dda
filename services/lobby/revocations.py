"""The ends of credentials, told to every gateway through one Redis stream.

A token that stops working must stop everything it opened, on every gateway, at once: the
streams opened with it (an account's event and play streams, a seat's stream) as well as each
gateway's memory of what it opens. Whatever ends a credential — an account's owner rotating or
revoking its token, the operator issuing a new one or banning the account, a lobby match called
off with its seats — appends an :class:`Ended` to ``<prefix>:revoked`` right after the change
itself is written; every gateway follows that stream (services/gateway/credentials.py).

The stream is trimmed to about :data:`KEPT` entries: a gateway that lost Redis for longer than
those take to write checks its accounts' streams against Redis on its own (its sweep) too.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from services.redis.connection import Client
from services.store.keys import Keys

KEPT = 10_000
"""About how many ends the revocation stream keeps."""

Reason = Literal[
    "token_rotated",
    "token_revoked",
    "token_reissued",
    "account_banned",
    "account_unbanned",
    "seat_ended",
]
"""Why a credential ended (``account_unbanned`` ends none: it only makes gateways forget a
banned account they remembered)."""

REASONS: dict[str, str] = {
    "token_rotated": "the account's token was rotated: open a new stream with the new token",
    "token_revoked": "the account's token was revoked",
    "token_reissued": "the operator issued the account a new token",
    "account_banned": "the account is banned",
    "account_unbanned": "the account's ban was lifted",
    "seat_ended": "the seat's match was called off: its token opens nothing more",
}
"""What a stream's closing line says of each reason."""


class Ended(msgspec.Struct, frozen=True, kw_only=True):
    """A credential that ended: an account's token (``token`` its SHA-256; empty: every token
    of the account, as a ban ends them), or a seat token (``kind`` "seat")."""

    kind: Literal["account", "seat"]
    reason: Reason
    account: str = ""
    token: str = ""


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Ended)


async def announce(redis: Client, keys: Keys, ended: Ended) -> None:
    """Tell every gateway that a credential ended (after the change itself is written)."""
    await redis.xadd(keys.revocations, {"d": _ENCODER.encode(ended)}, maxlen=KEPT, approximate=True)


def parse(fields: dict[bytes, bytes]) -> Ended | None:
    """The end an entry of the revocation stream tells, or None for an entry that is not one
    (a newer kind, or garbage: it is skipped, never guessed at)."""
    try:
        return _DECODER.decode(fields.get(b"d", b""))
    except msgspec.DecodeError:
        return None
