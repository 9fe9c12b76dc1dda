"""The seat's socket fuzzed (docs/protocol.md, "Socket"): hostile frames sent up one seat's
socket on a real running gateway — arbitrary text and binary frames, invalid UTF-8, JSON that
is no object, objects with unknown, missing or mistyped fields, move frames with odd keys and
malformed moves, hellos after the handshake, frames about the size limits, bursts — and legal
moves among them. Whatever comes, the gateway answers each frame within seconds with one
documented frame, a key it answers is one it was sent, an error's code is one the protocol
lists, the socket closes only with a documented code (1009 only for a frame over the WebSocket
layer's limit, 1007 only for text that is no UTF-8), the gateway stays healthy and opens the
seat again, and the match's log holds no event of the seat but those of well-formed moves it
answered ``accepted`` (or ``timeout``, or left unanswered when the socket closed).

The short run (a fixed seed) is part of ``make test``; ``make chaos`` runs many more examples
(DOMINO_FUZZ_EXAMPLES, DOMINO_FUZZ_SEED), as for the HTTP fuzzing beside it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import msgspec
import pytest
from hypothesis import strategies as st
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from events.model import MatchEnded
from services.gateway.protocol import (
    API,
    EventLine,
    MoveAccepted,
    MoveFrame,
    MoveLimited,
    MoveTimedOut,
    Snapshot,
    SocketError,
    SocketFrame,
    SocketLine,
    TurnLine,
)
from services.gateway.sockets import CLOSE_CODES, MATCH_OVER, frame_limit
from tests.gateway.conftest import STRICT_LIMITS, Gateways, create, join

pytestmark = [pytest.mark.chaos]

EXAMPLES = int(os.environ.get("DOMINO_FUZZ_EXAMPLES", "5"))
SEED = int(os.environ.get("DOMINO_FUZZ_SEED", "1"))
ANSWER_S = 5.0
"""Longer than any answer may take (the gateway waits for the referee less than this)."""
BODY_LIMITS = {"url": 4096, "strict_url": int(STRICT_LIMITS["DOMINO_GATEWAY_MAX_BODY_BYTES"])}
"""DOMINO_GATEWAY_MAX_BODY_BYTES of the fixture's two gateways: the playing one (its default)
and the strict one, whose moves limit a burst runs into."""
TOO_BIG = 1009
NOT_UTF8 = 1007
"""RFC 6455 8.1: a text frame that is no UTF-8 fails the connection, closed by the WebSocket
layer with 1007 before the gateway reads it (docs/protocol.md does not list it yet)."""

_DOC = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
_BAD_FRAMES = _DOC[_DOC.index("**Bad frames**") : _DOC.index("**Floods.**")]
ERRORS = set(re.findall(r"`([a-z_]+)`", _BAD_FRAMES)) - {"key", "error"}
"""The codes an error frame may carry: those docs/protocol.md's "Bad frames" lists."""
CLOSES = {MATCH_OVER, *CLOSE_CODES.values()}
"""The close codes an accepted socket may end with (4400-4503 are a hello's, never sent
on a socket opened with the header)."""

_FRAME = msgspec.json.Decoder(SocketFrame)
_MOVE_FRAME = msgspec.json.Decoder(MoveFrame)


# -- what is sent ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Legal:
    """Play the seat's first legal move of its latest turn line, the frame's other fields
    ``extra`` (a seat, a match id, anything: the frame well-formed or not)."""

    key: str
    extra: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Hello:
    """A hello frame with the seat's own token, on a socket already opened with it."""


@dataclass(frozen=True)
class Sized:
    """A move frame ``delta`` bytes off the gateway's body limit (``ws``: off the WebSocket
    layer's, 16 times it, over which the socket is closed with 1009)."""

    delta: int
    ws: bool = False


@dataclass(frozen=True)
class Raw:
    """One frame as is: ``str`` a text frame, ``bytes`` binary, ``utf8=False`` text bytes that
    are no UTF-8 (sent as a text frame)."""

    data: str | bytes
    utf8: bool = True

    def __repr__(self) -> str:
        return f"Raw({self.data!r:.300}, utf8={self.utf8})"


SMALL_INT = st.integers(-3, 30)
HUGE_INT = st.sampled_from([2**31, 2**63, 2**64 + 1, -(2**63) - 1, 10**400])
ODD_TEXT = st.one_of(
    st.just(""),
    st.text(max_size=20),
    st.text(st.characters(max_codepoint=0x1F), max_size=8),  # control characters
    st.text(st.characters(min_codepoint=0x80), min_size=1, max_size=10),  # unicode
    st.just("\x00"),
    st.just("x" * 65),
    st.just("k" * 3000),
)
KEYS = st.one_of(
    st.from_regex(r"[A-Za-z0-9._:-]{1,64}", fullmatch=True),
    ODD_TEXT,
    st.none(),
    SMALL_INT,
    HUGE_INT,
    st.lists(st.text(max_size=3), max_size=2),
)
JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), SMALL_INT, HUGE_INT, st.floats(allow_nan=False), ODD_TEXT
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
TILES = st.one_of(
    st.tuples(SMALL_INT, SMALL_INT).map(list),
    st.tuples(HUGE_INT, SMALL_INT).map(list),
    st.lists(SMALL_INT, max_size=4),
    JSON,
)
MOVES = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("play_tile")},
        optional={
            "seat": st.one_of(SMALL_INT, HUGE_INT, JSON),
            "tile": TILES,
            "end": st.one_of(st.none(), SMALL_INT, HUGE_INT, st.text(max_size=4), JSON),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["draw", "pass", "draw_tile", "pass_turn", "castle", ""])},
        optional={"seat": st.one_of(SMALL_INT, JSON), "x": JSON},
    ),
    st.sampled_from([{"type": "resign"}, {"type": "abort"}]),
    st.dictionaries(st.text(max_size=8), JSON, max_size=4),
    JSON,
)
MOVE_FRAMES = st.fixed_dictionaries(
    {"type": st.just("move")},
    optional={
        "key": KEYS,
        "move": MOVES,
        "match_id": st.one_of(st.none(), ODD_TEXT, SMALL_INT, st.just("m-0000000000")),
        "seat": st.one_of(st.none(), SMALL_INT, HUGE_INT, ODD_TEXT),
        "extra": JSON,
    },
)
OBJECTS = st.one_of(
    st.dictionaries(st.text(max_size=10), JSON, max_size=5),  # no type, unknown fields
    st.fixed_dictionaries({"type": JSON}, optional={"key": KEYS, "move": JSON}),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["hello", "line", "accepted", "error", "MOVE", " move"])},
        optional={"token": st.one_of(ODD_TEXT, JSON), "key": KEYS},
    ),
)


def _sized(n: int) -> str:
    """A move frame of exactly ``n`` bytes, its key padded."""
    head = '{"type":"move","move":{"type":"pass"},"key":"'
    return head + "k" * max(0, n - len(head) - 2) + '"}'


FRAMES = st.one_of(
    st.builds(Raw, st.text(max_size=60)),
    st.builds(Raw, st.binary(max_size=60)),
    st.builds(
        Raw,
        st.sampled_from([b"\xff", b"\xc3\x28", b'{"type":"move","key":"\xed\xa0\x80"}', b"\x80a"]),
        st.just(False),
    ),
    st.builds(Raw, JSON.map(json.dumps)),
    st.builds(Raw, OBJECTS.map(json.dumps)),
    st.builds(Raw, MOVE_FRAMES.map(lambda f: json.dumps(f, ensure_ascii=False))),
    st.builds(Sized, st.sampled_from([-1, 0, 1, 1000])),
    st.builds(Sized, st.sampled_from([-64, 1]), st.just(True)),
    st.just(Hello()),
    st.builds(
        Legal,
        st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True),
        st.dictionaries(
            st.sampled_from(["seat", "match_id", "x"]),
            st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, 0.0, 1.0, "0"]), JSON),
            max_size=2,
        ).map(lambda d: tuple(d.items())),
    ),
)
Frame = Raw | Sized | Hello | Legal
EXAMPLE = st.tuples(st.lists(FRAMES, min_size=1, max_size=12), st.booleans())
"""Frames, and whether they go as one burst (all sent, then the answers read)."""


# -- the match the fuzzer holds a seat of ------------------------------------------------------


@dataclass
class Seat:
    """A seat of a match against a house bot, and what its socket was answered."""

    url: str  # the gateway whose socket is fuzzed
    body_limit: int
    match_id: str
    seat: int
    token: str
    accepted: dict[str, int] = field(default_factory=dict)  # key: version
    maybe: set[str] = field(default_factory=set)  # well-formed moves timed out or unanswered
    legal: tuple[int, list[Any]] | None = None  # the latest turn's id and moves
    spent: bool = False  # answered limited, or its match over: the next example takes another

    @classmethod
    def new(cls, g: Gateways, which: str) -> Seat:
        """A fresh two-seat Express match against the greedy bot, its long turns never
        timing out during an example (made on the playing gateway: the strict one's lobby
        limit is for the tests of the limits)."""
        match_id = create(g.url, [None, "greedy"], rules={"family": "express"}, deadline_ms=120_000)
        seat, token = join(g.url, match_id)
        return cls(getattr(g, which), BODY_LIMITS[which], match_id, seat, token)

    def socket_url(self) -> str:
        """The seat's socket's address."""
        base = f"ws{self.url.removeprefix('http')}{API}"
        return f"{base}/matches/{self.match_id}/seats/{self.seat}/socket"


def opening(seat: Seat) -> Any:
    """The seat's socket (an async context manager), no limit on what it reads."""
    return connect(
        seat.socket_url(),
        additional_headers={"Authorization": f"Bearer {seat.token}"},
        proxy=None,
        open_timeout=10,
        close_timeout=5,
        max_size=None,
    )


async def opened(seat: Seat) -> ClientConnection:
    """The seat's socket, opened again while the place the last one held is still being
    given back (a 429 for its token's places)."""
    give_up = time.monotonic() + 5.0
    while True:
        try:
            sock: ClientConnection = await opening(seat)
            return sock
        except InvalidStatus as e:
            if e.response.status_code != 429 or time.monotonic() > give_up:
                raise
            await asyncio.sleep(0.1)


# -- the checks --------------------------------------------------------------------------------


class Reader:
    """The frames of one socket, each checked as it comes."""

    def __init__(self, sock: ClientConnection, seat: Seat) -> None:
        self.sock = sock
        self.seat = seat
        self.sent_keys: set[Any] = set()
        self.answers: list[Any] = []

    async def answer(self) -> Any:
        """The next frame that is no line (an outcome or an error), within ANSWER_S; lines on
        the way are checked and remembered."""
        deadline = time.monotonic() + ANSWER_S
        while True:
            left = deadline - time.monotonic()
            try:
                text = await asyncio.wait_for(self.sock.recv(), max(left, 0.01))
            except TimeoutError:
                pytest.fail(f"no answer in {ANSWER_S} s on {self.seat.match_id}")
            assert isinstance(text, str), f"a binary frame came down: {text!r:.200}"
            got = _FRAME.decode(text)  # any frame not of the protocol fails here
            assert (got.match_id, got.seat) == (self.seat.match_id, self.seat.seat), text
            if isinstance(got, SocketLine):
                self._line(got.line)
                continue
            if got.key is not None:
                assert got.key in self.sent_keys, f"answered a key never sent: {text:.300}"
            if isinstance(got, SocketError):
                assert got.error in ERRORS, f"an undocumented error code: {text:.300}"
            self.answers.append(got)
            hypothesis.note(f"answer: {text:.300}")
            return got

    async def settle(self, turn: bool) -> None:
        """Read the fresh socket's snapshot, and with ``turn`` wait a little for the seat's
        turn (the house bot's move) — before any frame is sent, so every frame read is a
        line."""
        deadline = time.monotonic() + ANSWER_S
        seen = False
        while not seen or (turn and self.seat.legal is None):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                text = await asyncio.wait_for(self.sock.recv(), left)
            except (TimeoutError, ConnectionClosed):
                return
            got = _FRAME.decode(text)
            assert isinstance(got, SocketLine), f"a frame before any was sent: {text!r:.300}"
            seen = True
            self._line(got.line)

    def _line(self, line: Any) -> None:
        if isinstance(line, Snapshot | TurnLine):
            legal = line.view.legal if line.view is not None else None
            self.seat.legal = (line.id, msgspec.to_builtins(legal)) if legal else None
        elif isinstance(line, EventLine):
            self.seat.legal = None


def _key(data: str | bytes) -> Any:
    """The key a text frame holds, if it is a JSON object with one."""
    if not isinstance(data, str):
        return None
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    return obj.get("key") if isinstance(obj, dict) else None


def _well_formed(data: str) -> bool:
    """Whether a frame is a move frame as the protocol defines it (MoveFrame)."""
    try:
        _MOVE_FRAME.decode(data)
    except msgspec.DecodeError:
        return False
    return True


async def fuzz(seat: Seat, frames: list[Frame], burst: bool) -> int | None:
    """Send ``frames`` up the seat's socket and check every answer; the socket's close code
    when the gateway closed it, else None (closed by the client after its answers)."""
    sock = await opened(seat)
    reader = Reader(sock, seat)
    await reader.settle(any(isinstance(f, Legal) for f in frames))
    sent: list[str | None] = []  # each frame's text, when it was well-formed
    too_big = not_utf8 = False
    try:
        for f in frames:
            if isinstance(f, Legal):
                if seat.legal is None:
                    continue
                version, legal = seat.legal
                data: str | bytes = json.dumps(
                    {
                        "type": "move",
                        "key": f"v{version}-{f.key}",
                        "move": legal[0],
                        **dict(f.extra),
                    }
                )
            elif isinstance(f, Hello):
                data = json.dumps({"type": "hello", "token": seat.token})
            elif isinstance(f, Sized):
                limit = frame_limit(seat.body_limit) if f.ws else seat.body_limit
                data = _sized(limit + f.delta)
            else:
                data = f.data
            key = _key(data)
            if isinstance(key, str):
                reader.sent_keys.add(key)
            sent.append(data if isinstance(data, str) and _well_formed(data) else None)
            too_big = too_big or len(
                data.encode() if isinstance(data, str) else data
            ) > frame_limit(seat.body_limit)
            if isinstance(f, Raw) and not f.utf8:
                assert isinstance(data, bytes)
                not_utf8 = True
                await sock.send(data, text=True)
            else:
                await sock.send(data)
            if not burst:
                await _answered(reader, data, sent[-1])
        if burst:
            for well in sent:
                await _answered(reader, None, well)
    except ConnectionClosed:
        # a move sent before the socket closed may have been played, its answer lost with it
        answered = {a.key for a in reader.answers}
        seat.maybe |= {_key(d) for d in sent if d is not None} - answered
        # a client still writing after a frame the WebSocket layer fails the connection on may
        # meet its reset before reading its close frame: the gateway closed it, as it must
        dropped = sock.protocol.close_rcvd is None and not (too_big or not_utf8)
        assert not dropped, f"dropped without a close after {frames!r:.2000}"
    finally:
        closed = sock.protocol.close_rcvd  # by the gateway, before the client closes
        await sock.close()
    code = closed.code if closed is not None else None
    if code is not None:
        assert code in CLOSES or (code, True) in {(TOO_BIG, too_big), (NOT_UTF8, not_utf8)}, (
            f"closed with {code} ({sock.close_reason!r}) after {frames!r:.2000}"
        )
        if code == MATCH_OVER:
            seat.spent = True
    return code


async def _answered(reader: Reader, data: str | bytes | None, well: str | None) -> None:
    """Read the answer to one frame and remember what it accepted."""
    got = await reader.answer()
    seat = reader.seat
    if data is not None and isinstance(got.key, str):
        assert got.key == _key(data), f"answered {got.key!r} to a frame keyed {_key(data)!r}"
    if isinstance(got, MoveAccepted | MoveTimedOut):
        known = got.key in seat.accepted
        if isinstance(got, MoveAccepted):
            seat.accepted.setdefault(got.key, got.version)
        else:
            seat.maybe.add(got.key)
        assert well is not None or known, f"an ill-formed frame was played: {data!r:.300}"
    if isinstance(got, MoveLimited):
        seat.spent = True  # a seat of a fresh match has its whole budget


def check_log(g: Gateways, seat: Seat) -> None:
    """Every event a command of the gateway appended is one of the seat's well-formed moves
    that was answered accepted (or timeout), at the version it was given."""
    log = g.log(seat.match_id)
    prefix = f"gw:{seat.seat}:"
    for env in log:
        if env.command_id.startswith("gw:"):
            key = env.command_id.removeprefix(prefix)
            assert env.command_id.startswith(prefix), f"another seat's move: {env!r}"
            assert key in seat.accepted or key in seat.maybe, f"a move never accepted: {env!r}"
        if isinstance(env.event, MatchEnded):
            seat.spent = True
    for key, version in seat.accepted.items():
        assert log[version - 1].command_id == prefix + key, (key, version, log[version - 1])


async def still_serves(seat: Seat) -> None:
    """/healthz answers 200 at once, and the seat's socket opens again and sends its snapshot
    (unless the match is over: it then sends the last snapshot and closes with 1000)."""
    async with httpx.AsyncClient(timeout=2.0) as client:
        r = await client.get(f"{seat.url}/healthz")
    assert r.status_code == 200, r.text
    sock = await opened(seat)
    try:
        first = _FRAME.decode(await asyncio.wait_for(sock.recv(), ANSWER_S))
        assert isinstance(first, SocketLine) and isinstance(first.line, Snapshot), first
    finally:
        await sock.close()


# -- the test ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tables(gateways: Gateways) -> dict[str, list[Seat]]:
    """The seat the fuzzer holds now on each gateway (a one-item list: replaced when spent)."""
    return {}


@pytest.mark.filterwarnings("ignore:Generating overly large repr")  # the strategy's own
@pytest.mark.parametrize("which", ["url", "strict_url"])
@hypothesis.settings(
    max_examples=4 * EXAMPLES,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    database=None,
)
@hypothesis.seed(SEED)
@hypothesis.given(example=EXAMPLE)
@hypothesis.example(example=([Raw(b"\xff", utf8=False)], False))  # closed 1007 (RFC 6455)
@hypothesis.example(example=([Legal("x", (("seat", False),))], False))  # false is no seat 0
def test_no_frame_makes_the_seats_socket_fail_hang_close_oddly_or_play_a_move_not_accepted(
    gateways: Gateways,
    tables: dict[str, list[Seat]],
    which: str,
    example: tuple[list[Frame], bool],
) -> None:
    """Any frames, one at a time or in a burst: each answered within ANSWER_S with a
    documented frame under a key it was sent, a documented close code, the gateway healthy
    and the seat open again after, and the log holding only accepted moves of the seat."""
    frames, burst = example
    hypothesis.note(f"{which}: burst={burst} {frames!r}")
    table = tables.setdefault(which, [])
    if not table or table[0].spent:
        table[:] = [Seat.new(gateways, which)]
    seat = table[0]
    try:
        asyncio.run(fuzz(seat, frames, burst))
        check_log(gateways, seat)
        asyncio.run(still_serves(seat))
    except BaseException:
        seat.spent = True  # the next example starts clean, not failing on this one's traces
        raise
