"""domino replay, verify, export and import: exact replay, and every bad file refused whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import msgspec
import pytest

from engine.rules import Rules
from engine.strategy import RandomStrategy
from engine.verify import verify
from events.codec import JSON
from events.envelope import Envelope
from events.model import TilePlayed
from services.cli import jsonl
from services.cli.supervisor import Stack
from services.config import Settings
from services.core.local_match import play_local_match
from tests.support.cli import run_domino

pytestmark = pytest.mark.service


def a_match(match_id: str = "m-replay1", family: str = "straight") -> list[Envelope]:
    rules = Rules.make(family, players=2)  # type: ignore[arg-type]
    return play_local_match(
        rules, [RandomStrategy(1), RandomStrategy(2)], seed=5, match_id=match_id
    )[1]


def domino(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return run_domino(*args, env=Stack(settings.redis_url or "", settings).env())


def lines(log: list[Envelope]) -> list[bytes]:
    return [JSON.encode(e) for e in log]


def test_a_tampered_log_fails_verify_at_the_first_event_that_differs() -> None:
    """S4: a play's recorded points are a derived fact the verifier recomputes."""
    log = a_match()
    assert verify([e.event for e in log]) is None
    k = next(i for i, e in enumerate(log) if isinstance(e.event, TilePlayed) and i > 10)
    event = log[k].event
    assert isinstance(event, TilePlayed)
    tampered = [e.event for e in log]
    tampered[k] = msgspec.structs.replace(event, points=event.points + 5)
    problem = verify(tampered)
    assert problem is not None and problem.version == k + 1


BAD_FILES = {
    "truncated line": lambda ls: [*ls[:5], ls[5][: len(ls[5]) // 2], *ls[6:]],
    "unknown event type": lambda ls: [
        *ls[:5],
        ls[5].replace(b'"type":"', b'"type":"x', 1),
        *ls[6:],
    ],
    "missing field": lambda ls: [*ls[:5], ls[5].replace(b'"seat":', b'"sear":', 1), *ls[6:]],
    "version gap": lambda ls: [*ls[:5], *ls[6:]],
    "duplicate version": lambda ls: [*ls[:6], ls[5], *ls[6:]],
    "out of order": lambda ls: [*ls[:5], ls[6], ls[5], *ls[7:]],
    "another match's line": lambda ls: [
        *ls[:5],
        ls[5].replace(b"m-replay1", b"m-other", 1),
        *ls[6:],
    ],
    "events that cannot follow": lambda ls: [ls[0], *ls[2:3]],
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_export_is_refused_naming_its_line_and_nothing_is_imported(
    case: str, tmp_path: Path, redis_url: str, key_prefix: str
) -> None:
    settings = Settings(redis_url=redis_url, prefix=key_prefix)
    bad = BAD_FILES[case](lines(a_match()))
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(bad) + b"\n")
    with pytest.raises(jsonl.LogFormatError) as error:
        jsonl.read(path)
    assert error.value.line >= 1
    done = domino(settings, "import", str(path))
    assert done.returncode == 2
    assert f"line {error.value.line}" in done.stderr
    assert domino(settings, "replay", "m-replay1").returncode == 2  # nothing was written


def test_export_import_replay_and_verify_round_trip_through_redis(
    tmp_path: Path, redis_url: str, key_prefix: str
) -> None:
    settings = Settings(redis_url=redis_url, prefix=key_prefix)
    log = a_match(family="express")
    source = tmp_path / "in.jsonl"
    jsonl.write(source, log)
    assert domino(settings, "import", str(source)).returncode == 0
    again = domino(settings, "import", str(source))
    assert again.returncode == 2 and "already exists" in again.stderr
    assert domino(settings, "verify", "m-replay1").returncode == 0
    out = tmp_path / "out.jsonl"
    assert domino(settings, "export", "m-replay1", "-o", str(out)).returncode == 0
    assert out.read_bytes() == source.read_bytes()

    shown = domino(settings, "replay", "m-replay1", "--json", "--at", "12", "--seat", "1")
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [r["version"] for r in rows[:-1]] == list(range(1, 13))
    dealt = next(r["event"] for r in rows if r.get("event", {}).get("type") == "round_started")
    assert dealt["stock"] is None
    assert [h is not None for h in dealt["hands"]] == [False, True]
    assert rows[-1]["seat"] == 1 and rows[-1]["version"] == 12  # the seat's view at event 12

    text = domino(settings, "replay", "--file", str(source), "--at", "3")
    assert text.returncode == 0 and "seat 0 holds" in text.stdout
