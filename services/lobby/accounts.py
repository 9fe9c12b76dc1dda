"""Bot accounts: a registered name, an API token shown once and kept only as its hash, bans.

An account is a hash ``acct:<id>`` (its name, when it was made, its token's SHA-256, whether
it is banned); ``name:<skeleton>`` says which account holds a name (see
:mod:`services.lobby.names`) and ``atoken:<sha256>`` which account a token opens. A token
works while it is the account's current one and the account is not banned: rotating makes a
new one and the old one stops working; revoking leaves the account with none until the
operator issues another.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from typing import Any, cast

import msgspec

from services.lobby.names import BadName, check_name, skeleton
from services.lobby.revocations import Ended, Reason, announce
from services.redis.connection import Client
from services.store.keys import Keys

TOKEN_PREFIX = "dab_"
"""Every account token begins with this; seat tokens never do."""


class AccountError(Exception):
    """Raised when an account action cannot be done; ``code`` says why (bad_name,
    reserved_name, name_taken, no_account)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Account(msgspec.Struct, frozen=True, kw_only=True):
    """What the service knows of an account (never its token)."""

    id: str
    name: str
    created: float
    banned: bool = False

    def public(self) -> dict[str, Any]:
        """The account as JSON."""
        return {"id": self.id, "name": self.name, "created": self.created, "banned": self.banned}


def new_token() -> str:
    """A fresh account token: the prefix and 256 random bits, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """What is stored of a token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def is_account_token(token: str) -> bool:
    """Whether ``token`` has the shape of an account token (not whether it is valid)."""
    return token.startswith(TOKEN_PREFIX)


class Accounts:
    """Registers, authenticates and manages accounts, in Redis."""

    def __init__(
        self,
        redis: Client,
        keys: Keys,
        pools: tuple[str, ...] = (),
        on_end: Callable[[Ended], object] | None = None,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.pools = pools  # house bot pools whose names are reserved
        self.on_end = on_end  # told of every end made here, as soon as it is announced

    async def register(self, name: str) -> tuple[Account, str]:
        """A new account named ``name`` and its token (shown once); raises AccountError for a
        name that is malformed, reserved, or taken (by its look-alike skeleton)."""
        try:
            check_name(name, self.pools)
        except BadName as e:
            raise AccountError(e.code, str(e)) from None
        account_id = "u-" + secrets.token_hex(6)
        claimed = await self.redis.set(self.keys.account_name(skeleton(name)), account_id, nx=True)
        if not claimed:
            raise AccountError("name_taken", f"the name {name!r} (or one too like it) is taken")
        token = new_token()
        now = round(time.time(), 3)
        await self.redis.hset(
            self.keys.account(account_id),
            mapping={"name": name, "created": repr(now), "token": digest(token), "banned": 0},
        )
        await self.redis.set(self.keys.account_token(digest(token)), account_id)
        await self.redis.zadd(self.keys.accounts, {account_id: now})
        return Account(id=account_id, name=name, created=now), token

    async def get(self, account_id: str) -> Account | None:
        """The account with this id, or None."""
        if not account_id.startswith("u-") or len(account_id) > 40:
            return None
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(self.keys.account(account_id)))
        return _parse(account_id, raw) if raw else None

    async def by_name(self, name: str) -> Account | None:
        """The account holding ``name`` (or a name too like it), or None."""
        if not isinstance(name, str) or not 0 < len(name) <= 40:
            return None
        raw = cast(bytes | None, await self.redis.get(self.keys.account_name(skeleton(name))))
        return None if raw is None else await self.get(raw.decode())

    async def authenticate(self, token: str) -> Account | None:
        """The account ``token`` opens, or None: unknown, rotated away or revoked. A banned
        account is returned (``banned`` set): the caller refuses it with a reason."""
        if not is_account_token(token) or len(token) > 100:
            return None
        d = digest(token)
        raw = cast(bytes | None, await self.redis.get(self.keys.account_token(d)))
        if raw is None:
            return None
        account_id = raw.decode()
        fields = cast(dict[bytes, bytes], await self.redis.hgetall(self.keys.account(account_id)))
        current = fields.get(b"token", b"").decode()
        if not current or not secrets.compare_digest(current, d):
            return None
        return _parse(account_id, fields)

    async def rotate(self, account_id: str, reason: Reason = "token_rotated") -> str:
        """A new token for the account (shown once); the old one stops working, and every
        gateway is told so (``reason``: its owner rotated it, or the operator re-issued it)."""
        key = self.keys.account(account_id)
        old = cast(bytes | None, await self.redis.hget(key, "token"))
        if not await self.redis.exists(key):
            raise AccountError("no_account", f"no account {account_id!r}")
        token = new_token()
        await self.redis.set(self.keys.account_token(digest(token)), account_id)
        await self.redis.hset(key, "token", digest(token))
        if old:
            await self.redis.delete(self.keys.account_token(old.decode()))
            await self._ended(account_id, reason, old.decode())
        return token

    async def revoke(self, account_id: str) -> None:
        """The account's token stops working, on every gateway; only the operator can issue
        it another."""
        key = self.keys.account(account_id)
        old = cast(bytes | None, await self.redis.hget(key, "token"))
        await self.redis.hset(key, "token", "")
        if old:
            await self.redis.delete(self.keys.account_token(old.decode()))
            await self._ended(account_id, "token_revoked", old.decode())

    async def ban(self, account_id: str, banned: bool = True) -> Account:
        """Ban (or lift the ban on) an account, on every gateway at once; raises AccountError
        if there is none."""
        key = self.keys.account(account_id)
        if not await self.redis.exists(key):
            raise AccountError("no_account", f"no account {account_id!r}")
        await self.redis.hset(key, "banned", int(banned))
        await self._ended(account_id, "account_banned" if banned else "account_unbanned", "")
        account = await self.get(account_id)
        assert account is not None
        return account

    async def _ended(self, account_id: str, reason: Reason, token: str) -> None:
        ended = Ended(kind="account", reason=reason, account=account_id, token=token)
        await announce(self.redis, self.keys, ended)
        if self.on_end is not None:
            self.on_end(ended)

    async def current(self, account_ids: list[str]) -> dict[str, tuple[str, bool]]:
        """Each account's current token (its SHA-256, empty once revoked) and whether it is
        banned; accounts that do not exist are left out."""
        if not account_ids:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for account_id in account_ids:
            pipe.hmget(self.keys.account(account_id), ["token", "banned"])
        found = await pipe.execute()
        return {
            account_id: (token.decode(), banned == b"1")
            for account_id, (token, banned) in zip(account_ids, found, strict=True)
            if token is not None
        }

    async def names(self, ids: list[str]) -> dict[str, str]:
        """The names of these accounts (ids without an account are left out)."""
        if not ids:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for account_id in ids:
            pipe.hget(self.keys.account(account_id), "name")
        found = await pipe.execute()
        return {i: n.decode() for i, n in zip(ids, found, strict=True) if n is not None}


def _parse(account_id: str, raw: dict[bytes, bytes]) -> Account:
    return Account(
        id=account_id,
        name=raw[b"name"].decode(),
        created=float(raw[b"created"]),
        banned=raw.get(b"banned", b"0") == b"1",
    )
