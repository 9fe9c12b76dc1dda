"""The export format: JSON lines, one event envelope a line, versions 1, 2, 3 … in order.

Each line is an :class:`events.envelope.Envelope` as JSON, e.g.::

    {"match_id":"m-1","version":1,"command_id":"c-1","ts":1764500000.5,
     "event":{"type":"match_created","rules":{...},"players":["a","b"]},"schema":1}

Reading checks every line before anything is used: nothing partial is ever returned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from engine.game import FoldError, evolve
from engine.state import MatchState
from events.codec import JSON, DecodeError
from events.envelope import Envelope


class LogFormatError(ValueError):
    """Raised when an exported log is not a valid match: names the line and what is wrong."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def dumps(envelopes: Iterable[Envelope]) -> bytes:
    """The JSON-lines text of a match log."""
    return b"".join(JSON.encode(e) + b"\n" for e in envelopes)


def write(path: str | Path, envelopes: Iterable[Envelope]) -> int:
    """Write a match log to ``path`` (atomically: a temporary file renamed); return the count."""
    envelopes = list(envelopes)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(dumps(envelopes))
    tmp.replace(target)
    return len(envelopes)


def parse(
    lines: Sequence[bytes], match_id: str | None = None, *, fold: bool = True
) -> list[Envelope]:
    """Decode and check a whole log; raise LogFormatError at the first bad line.

    Checks: each line is a complete envelope of a known event type and schema; every line is of
    the same match (``match_id`` if given); versions run 1, 2, 3 … with no gap, duplicate or
    disorder; and, unless ``fold`` is False, the events fold into a match (the first creates
    it). Events as a seat or spectator saw them hide the deal and do not fold: only the
    fairness check reads those (``fold=False``).
    """
    out: list[Envelope] = []
    state: MatchState | None = None
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            raise LogFormatError(n, "empty line")
        try:
            env = JSON.decode_envelope(raw)
        except DecodeError as e:
            hint = " (truncated?)" if not raw.rstrip().endswith(b"}") else ""
            raise LogFormatError(n, f"{e}{hint}") from None
        if match_id is None:
            match_id = env.match_id
        if env.match_id != match_id:
            raise LogFormatError(n, f"event of match {env.match_id!r}, expected {match_id!r}")
        expected = len(out) + 1
        if env.version != expected:
            if env.version < expected:
                what = "duplicate" if env.version == expected - 1 else "out of order"
            else:
                what = f"gap: versions {expected}..{env.version - 1} are missing"
            raise LogFormatError(n, f"version {env.version} where {expected} was due ({what})")
        try:
            if fold:
                state = evolve(state, env.event)
        except FoldError as e:
            raise LogFormatError(n, f"version {env.version}: {e}") from None
        out.append(env)
    if not out:
        raise LogFormatError(0, "no events")
    return out


def read(path: str | Path, match_id: str | None = None, *, fold: bool = True) -> list[Envelope]:
    """Read and check an exported match log (see :func:`parse`)."""
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return parse(lines, match_id, fold=fold)
