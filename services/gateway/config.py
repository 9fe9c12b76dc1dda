"""The gateway's own settings, from environment variables, each with a default.

As in services/config.py, each field declares its variable and meaning; ``domino settings``
prints them. The Redis, key prefix and partitions are the services' (services/config.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import msgspec

from services.config import Var, env_names, read_env


class GatewayConfigError(ValueError):
    """Raised when a gateway variable holds a value its setting cannot take."""


class GatewaySettings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting of the gateway, each with its variable and meaning."""

    host: Annotated[str, Var("DOMINO_GATEWAY_HOST", "address to listen on")] = "127.0.0.1"
    port: Annotated[int, Var("DOMINO_GATEWAY_PORT", "port to listen on")] = 8080
    trusted_proxies: Annotated[
        str,
        Var(
            "DOMINO_GATEWAY_TRUSTED_PROXIES",
            "addresses or networks (comma-separated; * for any) of the reverse proxies in "
            "front, whose X-Forwarded-For names the client; empty: the peer is the client",
        ),
    ] = ""
    allowed_hosts: Annotated[
        str,
        Var(
            "DOMINO_GATEWAY_ALLOWED_HOSTS",
            "the Host names (comma-separated, with or without a port) a POST, PUT or DELETE may "
            "carry, else 403; * for any; empty: any, allowed only when listening on loopback",
        ),
    ] = ""
    allowed_origins: Annotated[
        str,
        Var(
            "DOMINO_GATEWAY_ALLOWED_ORIGINS",
            "other sites' origins (comma-separated, https://example.org) whose pages may POST, "
            "PUT or DELETE; a request with any other Origin but the gateway's own gets 403",
        ),
    ] = ""
    idle_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_IDLE_S",
            "a client connection with no request under way (new, or between two requests) is "
            "closed after this many seconds without a byte",
        ),
    ] = 20.0
    head_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_HEAD_S",
            "a request's head (its line and headers) must arrive within this many seconds of "
            "its first byte (else 408, and the connection is closed)",
        ),
    ] = 10.0
    body_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_BODY_S",
            "a request's body must arrive within this many seconds of its head (else the "
            "connection is closed); no deadline runs while a response, a stream, is written",
        ),
    ] = 10.0
    max_connections: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_MAX_CONNECTIONS",
            "client connections one gateway process keeps open at once, streams included; "
            "past it a new one is answered 503 and closed",
        ),
    ] = 4096
    # 256 is a sixteenth of the default cap above, under which two hosts could hold every
    # place: sixteen hosts (or /64s) are needed to fill a process now. It is far above what one
    # client needs (a browser opens 6 connections to a site; a bot, a stream and one or two for
    # its moves) and leaves room for many users behind one NAT, or dozens of bots on one host.
    max_connections_per_address: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS",
            "client connections one gateway process keeps open at once from one peer address "
            "(an IPv6 one with its /64), streams included; past it a new one is answered 503 "
            "and closed. Trusted proxies are not counted: they cap their clients themselves",
        ),
    ] = 256
    max_body_bytes: Annotated[
        int, Var("DOMINO_GATEWAY_MAX_BODY_BYTES", "larger request bodies are refused (413)")
    ] = 4096
    # Moves are sized for play, not to pace it: an SDK bot against house bots on loopback (the
    # fastest a seat can go: every answer is instant) peaked at 399 moves in one second (Express
    # 2p, target 2000; a whole default Express or Straight match is 26-130 moves, under a second).
    # What a client can abuse is rejected moves, refused with their own budget below.
    moves_per_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_MOVES_PER_S",
            "moves one seat may post per second, sustained (a bot playing house bots as fast "
            "as it can peaked at 399)",
        ),
    ] = 1000.0
    move_burst: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_MOVE_BURST",
            "moves one seat may post at once before the rate applies",
        ),
    ] = 1000
    rejected_moves_per_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_REJECTED_MOVES_PER_S",
            "rejected moves one seat of a match may post per second, sustained; past it the "
            "seat's moves get 429 before they reach the referee (the account's other matches "
            "are not held up)",
        ),
    ] = 0.2
    rejected_move_burst: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_REJECTED_MOVE_BURST",
            "rejected moves one seat of a match may post at once before the rate applies",
        ),
    ] = 20
    auth_failures_per_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_AUTH_FAILURES_PER_S",
            "unknown tokens a client address may present per second, sustained (then 429)",
        ),
    ] = 0.2
    auth_failure_burst: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_AUTH_FAILURE_BURST",
            "unknown tokens a client address may present at once before the rate applies",
        ),
    ] = 20
    # The operator presents one token, kept in a secret store: a wrong one is a slip or a
    # guess. A few slips pass at once; guesses come three a minute.
    operator_failures_per_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_OPERATOR_FAILURES_PER_S",
            "wrong operator tokens a client address may present per second, sustained; past "
            "it its operator calls get 429 before the token is compared",
        ),
    ] = 0.05
    operator_failure_burst: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_OPERATOR_FAILURE_BURST",
            "wrong operator tokens a client address may present at once before the rate applies",
        ),
    ] = 10
    streams_per_token: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_STREAMS_PER_TOKEN",
            "streams open at once per seat (with its seat token or its account's)",
        ),
    ] = 2
    streams_per_account: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_STREAMS_PER_ACCOUNT",
            "account streams (its feed, its play stream) open at once per account",
        ),
    ] = 4
    streams_per_client: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_STREAMS_PER_CLIENT",
            "spectator streams (of a match, of an arena) open at once per client address",
        ),
    ] = 64
    player_streams_per_client: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_PLAYER_STREAMS_PER_CLIENT",
            "seat and account streams (feeds, play streams) open at once per client address, "
            "whatever the tokens they were opened with",
        ),
    ] = 256
    stream_lease_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_STREAM_LEASE_S",
            "an open stream counts against its limit this long after its gateway last renewed "
            "it, so a crashed gateway's streams free their places",
        ),
    ] = 30.0
    lobby_per_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_LOBBY_PER_S",
            "matches created or seats joined per second per client address",
        ),
    ] = 5.0
    lobby_burst: Annotated[
        int, Var("DOMINO_GATEWAY_LOBBY_BURST", "lobby writes at once per client address")
    ] = 20
    open_matches_per_client: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_OPEN_MATCHES_PER_CLIENT",
            "matches waiting for players that one client address may have created",
        ),
    ] = 20
    waiting_seats_per_client: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_WAITING_SEATS_PER_CLIENT",
            "seats one client address may hold in matches still waiting for players",
        ),
    ] = 40
    keepalive_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_KEEPALIVE_S",
            "a stream with nothing to say sends a keep-alive after this many seconds",
        ),
    ] = 10.0
    move_timeout_s: Annotated[
        float,
        Var("DOMINO_GATEWAY_MOVE_TIMEOUT_S", "seconds a move waits for the referee's answer"),
    ] = 5.0
    token_ttl_s: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_TOKEN_TTL_S",
            "a started match's lobby record and seat tokens expire after this many seconds"
            " (7 days), if the archiver has not removed them with the match before",
        ),
    ] = 604_800
    token_cache_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_TOKEN_CACHE_S",
            "a gateway process trusts its look-up of a seat or account token this long when "
            "the revocation stream is out of reach (a token rotated, revoked or banned stops "
            "working at once through it); a seat token that expired stops within it",
        ),
    ] = 5.0
    token_cache_size: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_TOKEN_CACHE_SIZE",
            "the most tokens (of seats, of accounts) a gateway process remembers, the least "
            "recently used leaving first",
        ),
    ] = 100_000
    lobby_ttl_s: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_LOBBY_TTL_S",
            "a lobby match still waiting for players is removed after this many seconds, its"
            " seat tokens and its creator's and joiners' holds with it",
        ),
    ] = 3600
    stream_buffer_bytes: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_STREAM_BUFFER_BYTES",
            "a stream this many bytes behind is cut (its client resumes)",
        ),
    ] = 1 << 20
    # Bulk reads take a place before they read a log (services/gateway/admission.py), so that
    # a burst of them never holds up play: moves and seat streams never take one.
    bulk_reads: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_BULK_READS",
            "bulk reads (replays, spectator streams resumed from an event, match lists, "
            "ratings, players) one gateway process makes at once; play never waits for them",
        ),
    ] = 16
    bulk_reads_per_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_BULK_READS_PER_S",
            "bulk reads one gateway process starts a second at most (a burst of "
            "DOMINO_GATEWAY_BULK_READS at once); the others wait for their turn, or get 429",
        ),
    ] = 200.0
    bulk_wait_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_BULK_WAIT_S",
            "the longest a bulk read waits for its turn; one whose turn is further away is "
            "answered 429 at once, with a retry_after that is its turn",
        ),
    ] = 2.0
    finished_cache_bytes: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_FINISHED_CACHE_BYTES",
            "finished matches' replays and stream lines one gateway process keeps made, in "
            "bytes (a finished match's log never changes)",
        ),
    ] = 64 << 20

    operator_token: Annotated[
        str,
        Var(
            "DOMINO_OPERATOR_TOKEN",
            "the operator's token for bans, cancelling any match and arenas (empty: no operator)",
        ),
    ] = ""
    default_deadline_ms: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_DEFAULT_DEADLINE_MS",
            "each turn's time limit in a match with outside players, unless the creator sets one",
        ),
    ] = 10_000
    max_deadline_ms: Annotated[
        int, Var("DOMINO_GATEWAY_MAX_DEADLINE_MS", "the longest turn a creator may set")
    ] = 120_000
    forfeit_after: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_FORFEIT_AFTER",
            "a seat that times out this many turns in a row forfeits the match",
        ),
    ] = 3
    max_target: Annotated[
        int, Var("DOMINO_GATEWAY_MAX_TARGET", "the highest match target a creator may set")
    ] = 1000
    max_rounds: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_MAX_ROUNDS",
            "a match ends after this many rounds even if nobody reached the target",
        ),
    ] = 100
    matches_per_account: Annotated[
        int,
        Var("DOMINO_GATEWAY_MATCHES_PER_ACCOUNT", "live matches an account may play at once"),
    ] = 20
    challenge_ttl_s: Annotated[
        int, Var("DOMINO_GATEWAY_CHALLENGE_TTL_S", "an unanswered challenge expires after this")
    ] = 600
    challenges_per_minute: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_CHALLENGES_PER_MINUTE",
            "challenges one account may make a minute (this many at once, refilled over the "
            "minute)",
        ),
    ] = 20
    challenges_received_per_minute: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_CHALLENGES_RECEIVED_PER_MINUTE",
            "challenges one account may be sent a minute, by everyone together (this many at "
            "once, refilled over the minute)",
        ),
    ] = 60
    open_challenges_per_account: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_OPEN_CHALLENGES_PER_ACCOUNT",
            "challenges one account may have made that are still open (unanswered, unexpired)",
        ),
    ] = 10
    open_challenges_to_account: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_OPEN_CHALLENGES_TO_ACCOUNT",
            "open challenges waiting for one account's answer, from everyone together",
        ),
    ] = 20
    open_challenges_per_pair: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_OPEN_CHALLENGES_PER_PAIR",
            "open challenges one account may have made to one other account (as many as the "
            "SDK's bots play at once)",
        ),
    ] = 4
    seek_ttl_s: Annotated[
        int, Var("DOMINO_GATEWAY_SEEK_TTL_S", "a seek nobody matched expires after this")
    ] = 600
    seek_fill_s: Annotated[
        float,
        Var(
            "DOMINO_GATEWAY_SEEK_FILL_S",
            "a seek waiting this long is filled with house bots (0: never)",
        ),
    ] = 30.0
    seek_house_pool: Annotated[
        str, Var("DOMINO_GATEWAY_SEEK_HOUSE_POOL", "the house bot pool that fills seeks")
    ] = "greedy"
    seeks_per_account: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_SEEKS_PER_ACCOUNT",
            "seeks one account may have waiting at once (of different kinds)",
        ),
    ] = 2
    house_matches_per_account: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_HOUSE_MATCHES_PER_ACCOUNT",
            "matches with house bot seats an account may have caused that are not over (created "
            "with house seats, or its seeks filled by house bots)",
        ),
    ] = 2
    house_matches_per_client: Annotated[
        int,
        Var(
            "DOMINO_GATEWAY_HOUSE_MATCHES_PER_CLIENT",
            "matches with house bot seats one client address may have caused that are not over "
            "(created with house seats, or seeks it made filled by house bots)",
        ),
    ] = 8

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GatewaySettings:
        """Read the settings from ``environ`` (default: the process environment); raises
        GatewayConfigError naming a variable that is not a valid, positive value."""
        settings = read_env(cls, environ, GatewayConfigError)
        numbers = {f: v for f in ENV if isinstance(v := getattr(settings, f), int | float)}
        bad = [ENV[f] for f, v in numbers.items() if v <= 0 and f not in _MAY_BE_ZERO]
        if bad:
            raise GatewayConfigError(f"{', '.join(bad)} must be positive")
        return settings


_MAY_BE_ZERO = {"seek_fill_s"}
ENV: dict[str, str] = env_names(GatewaySettings)
"""Each gateway setting and the environment variable it is read from."""
