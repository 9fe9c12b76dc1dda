"""The limits of what accounts ask of each other and of the house: challenges, seeks' and
matches' house bots.

Challenges are counted three ways, each against its own limit, so that no few accounts on many
addresses can flood one: those an account made that are still open, those waiting for one
account's answer, and those one account made to one other; and, as rates, those an account
makes and those an account is sent, a minute. An open challenge's holds are listed under it and
freed together when it closes (answered, withdrawn, started) or expires.

Matches with house bot seats cost the house its bots' time, so they are counted while they are
not over, for the account and the client address that caused them: created with house seats
(``POST /matches``), or a seek filled by house bots. Every count is kept in Redis
(services/gateway/limits.py): every gateway process counts against one budget.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.gateway.config import GatewaySettings
from services.gateway.limits import (
    Cap,
    Counted,
    Hold,
    LimitExceeded,
    LiveCap,
    Over,
    RateLimit,
    release_match,
)
from services.lobby.challenges import Challenge
from services.redis.lua import Client
from services.store.keys import Keys

FREED = "each is freed when the challenge is answered, withdrawn or expires"


def _per_minute(name: str, per_minute: int, keys: Keys) -> RateLimit:
    """A limit of ``per_minute`` a minute: that many at once, refilled over the minute."""
    return RateLimit(name, per_minute / 60, per_minute, keys)


def _account(account_id: str) -> str:
    return f"acct:{account_id}"


class LobbyLimits:
    """The challenge, seek and house-match limits of one gateway's settings."""

    def __init__(self, config: GatewaySettings, keys: Keys) -> None:
        self.keys = keys
        ttl = config.challenge_ttl_s
        self.challenges_made = _per_minute(
            "challenges_per_minute", config.challenges_per_minute, keys
        )
        self.challenges_sent = _per_minute(
            "challenges_received_per_minute", config.challenges_received_per_minute, keys
        )
        self.open_made = Cap(
            "open_challenges_per_account",
            config.open_challenges_per_account,
            keys,
            ttl,
            "this account has made {limit} challenges still open; " + FREED,
        )
        self.open_to = Cap(
            "open_challenges_to_account",
            config.open_challenges_to_account,
            keys,
            ttl,
            "an account challenged has {limit} challenges waiting for its answer; " + FREED,
        )
        self.open_pair = Cap(
            "open_challenges_per_pair",
            config.open_challenges_per_pair,
            keys,
            ttl,
            "this account has made {limit} challenges still open to one it names; " + FREED,
        )
        self.house_by_account = LiveCap(
            "house_matches_per_account", config.house_matches_per_account, keys, "this account"
        )
        self.house_by_client = LiveCap(
            "house_matches_per_client", config.house_matches_per_client, keys, "this address"
        )

    # -- challenges ----------------------------------------------------------------------------

    async def challenge(self, redis: Client, challenge: Challenge) -> None:
        """Count a challenge about to be made against every challenge limit; raise
        LimitExceeded (counting nothing that stays) when it is over one. Its holds end with
        :meth:`challenge_closed`, or when it expires."""
        holds: list[tuple[Cap, Hold]] = []
        challenger = challenge.challenger
        try:
            wanted = [(self.open_made, _account(challenger))]
            for opponent in challenge.opponents:
                wanted.append((self.open_to, _account(opponent)))
                wanted.append((self.open_pair, f"pair:{challenger}:{opponent}"))
            for cap, subject in wanted:
                holds.append((cap, await cap.hold(redis, subject, challenge.id)))
            sent = [(self.challenges_sent, _account(o)) for o in challenge.opponents]
            await self.challenges_made.hit(redis, _account(challenger), unless_spent=sent)
        except BaseException:
            for cap, hold in holds:
                await cap.drop(redis, hold)
            raise
        for limit, subject in sent:
            await limit.count(redis, subject)

    async def challenge_closed(self, redis: Client, challenge_id: str) -> None:
        """The challenge closed (answered, withdrawn, started or failed): free its holds."""
        await release_match(redis, self.keys, challenge_id)

    # -- house bots ----------------------------------------------------------------------------

    async def house_match(
        self,
        redis: Client,
        match_id: str,
        accounts: Sequence[str],
        clients: Sequence[str],
        over: Over,
    ) -> list[tuple[LiveCap, Counted]]:
        """Count a match with house bots about to be made for the accounts and client
        addresses that cause it; raise LimitExceeded (counting nothing) when one of them is at
        its limit. Return what was counted, for :meth:`house_match_failed`."""
        counted: list[tuple[LiveCap, Counted]] = []
        wanted = [(self.house_by_account, _account(a)) for a in dict.fromkeys(accounts)]
        wanted += [(self.house_by_client, c) for c in dict.fromkeys(c for c in clients if c)]
        try:
            for cap, subject in wanted:
                counted.append((cap, await cap.count(redis, subject, match_id, over)))
        except BaseException:
            await self.house_match_failed(redis, counted)
            raise
        return counted

    async def house_match_failed(
        self, redis: Client, counted: Sequence[tuple[LiveCap, Counted]]
    ) -> None:
        """The match counted was not made after all: stop counting it."""
        for cap, one in counted:
            await cap.drop(redis, one)

    async def may_fill(self, redis: Client, account: str, client: str, over: Over) -> bool:
        """Whether house bots may fill a seek of ``account`` made from ``client``: neither is
        at its limit of house matches (counting nothing)."""
        try:
            await self.house_by_account.check(redis, _account(account), over)
            if client:
                await self.house_by_client.check(redis, client, over)
        except LimitExceeded:
            return False
        return True
