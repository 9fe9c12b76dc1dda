"""Every match log an earlier release wrote replays exactly with today's code.

``tests/golden/corpus/<schema>/`` was written once, by the release whose stored shapes are
schema ``<schema>`` (``python -m tests.golden.make_corpus``), and is never written again: a
release that changes a stored shape adds a directory of its own beside the old ones
(README.md here). Each match directory holds one finished match in every form the service
keeps it — ``export.jsonl`` (what ``domino export`` writes), ``archive.jsonl.gz`` (the
archive's object), ``redis.jsonl`` (the entries of its match stream in Redis: id, ``type``,
``__data__``) — and ``expected.json``: what the match came to, round by round, and what
``domino verify`` answered on it.

Each form is read only through today's readers — ``jsonl``, the archive through
``MatchSource``, the Redis and in-memory event stores — which decode with
``JSON.decode_envelope``, so a corpus of an older schema goes through its upcasters. Each log
is folded through ``engine.game.evolve`` and compared with ``expected.json`` by digests of
rule-level facts:

- a round's facts, read from the state folded through its ``round_ended``: the round number,
  the seat that led it, how it ended (``outcome``), the seat and the side that won it and the
  points they scored, every side's score after it, every seat's hand left (sorted tiles) and
  its count (C2), the line's tiles in the order played, and how many tiles the stock held;
- the match's facts, from the state folded through its ``match_ended``: why it ended, the
  winning side (None: aborted or cancelled), the seat that resigned, forfeited or aborted,
  every side's score, how many rounds were dealt and how many events the log holds.

A digest is the SHA-256 of the facts as canonical JSON (keys sorted, no spaces; a tile is
``[low, high]``). It is over what the rules say happened, never over the engine's structs or
their encoding: a field added to the state or to an event leaves it as it is, a change of
meaning — a score, a hand, a winner — does not.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from engine import fairness
from engine.game import evolve
from engine.state import MatchState
from engine.verify import verify
from events.envelope import Envelope
from events.model import (
    AnyEvent,
    MatchCreated,
    MatchEnded,
    RoundEnded,
    RoundStarted,
    TileDrawn,
    TilePlayed,
    TurnPassed,
    TurnTimedOut,
)
from events.vocabulary import Rules, Tile
from services.cli import jsonl
from services.cli.main import main as domino
from services.redis.connection import node_client
from services.store import (
    DirectoryArchive,
    MatchSource,
    MemoryEventStore,
    NewEvent,
    RedisEventStore,
)
from services.store.base import Recorded

pytestmark = pytest.mark.golden

CORPUS = Path(__file__).parent / "corpus"
EXPORT = "export.jsonl"
ARCHIVE = "archive.jsonl.gz"
REDIS = "redis.jsonl"
EXPECTED = "expected.json"
MANIFEST = "manifest.json"
FORMS = ("export", "archive", "redis", "memory")
"""How a match is read: its export; the archive's object, through ``MatchSource``; its Redis
entries written into a real Redis and read by ``RedisEventStore``; the same entries appended
to a ``MemoryEventStore``."""
CLI_CHECKS: dict[str, tuple[str, ...]] = {
    "verify": (),
    "verify --fairness": ("--fairness",),
    "verify --fairness --public": ("--fairness", "--public"),
}
"""The ``domino verify --file export.jsonl`` runs whose answers each match records."""

Facts = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# the digest (its meaning never changes: README.md)


def _tiles(tiles: Sequence[Tile]) -> list[list[int]]:
    return [[a, b] for a, b in tiles]


def round_facts(state: MatchState) -> Facts:
    """The rule-level facts of the round ``state`` was just folded to the end of."""
    end = state.last_round
    if end is None or end.round != state.round:
        raise ValueError(f"round {state.round} has not ended at version {state.version}")
    return {
        "round": state.round,
        "leader": state.leader,
        "outcome": end.outcome,
        "winner": end.winner,
        "side": end.side,
        "points": end.points,
        "scores": list(state.scores),
        "hands": [_tiles(sorted(hand)) for hand in state.hands],
        "counts": [sum(a + b for a, b in hand) for hand in state.hands],
        "line": _tiles(state.played),
        "stock": len(state.stock),
    }


def match_facts(state: MatchState) -> Facts:
    """The rule-level facts of the match ``state`` was folded to the end of."""
    result = state.result
    if result is None:
        raise ValueError(f"the match has not ended at version {state.version}")
    return {
        "reason": result.reason,
        "winner": result.winner,
        "resigned": result.resigned,
        "scores": list(state.scores),
        "rounds": state.round,
        "events": state.version,
    }


def digest(facts: Facts) -> str:
    """SHA-256 of the facts as canonical JSON (keys sorted, no spaces)."""
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Replay:
    """A match log folded: each round's facts, then the match's."""

    rounds: list[Facts]
    final: Facts


def replay(envelopes: Sequence[Envelope]) -> Replay:
    """Fold a whole log through the engine; raise ValueError unless it ends its match."""
    state: MatchState | None = None
    rounds: list[Facts] = []
    for envelope in envelopes:
        state = evolve(state, envelope.event)
        if isinstance(envelope.event, RoundEnded):
            rounds.append(round_facts(state))
    if state is None:
        raise ValueError("an empty log")
    return Replay(rounds, match_facts(state))


def answers(events: Sequence[AnyEvent]) -> Facts:
    """What the checks ``domino verify`` runs say of a whole log: the rules' first
    discrepancy (None: every event agrees), and each round's fairness, on the whole log and
    on what a spectator sees (F1)."""
    problem = verify(events)
    return {
        "verify": None if problem is None else msgspec.to_builtins(problem),
        "fairness": msgspec.to_builtins(fairness.rounds(events, public=False)),
        "fairness_public": msgspec.to_builtins(fairness.rounds(events, public=True)),
    }


# ---------------------------------------------------------------------------------------------
# what a corpus must cover


def _blocked_tie(rules: Rules, end: RoundEnded) -> bool:
    """Whether a blocked round's lowest count is shared by two sides (C7 decides it)."""
    sides = [0] * rules.sides
    for seat, count in enumerate(end.counts):
        sides[rules.side_of(seat)] += count
    return sides.count(min(sides)) > 1


def features(events: Sequence[AnyEvent]) -> set[str]:
    """The cases a match log exercises, named as :data:`REQUIRED` names them."""
    created = events[0]
    if not isinstance(created, MatchCreated):
        raise ValueError("a match log opens with match_created")
    rules = created.rules
    family = rules.family
    found = {f"{family} {rules.players} players", f"{family} double-{rules.top}"}
    if rules.partners:
        found.add(f"{family} partners")
    timed_out: set[int] = set()
    for event, after in zip(events, [*events[1:], None], strict=True):
        if isinstance(event, RoundStarted):
            found.add("seeded deal" if event.commitment is not None else "unseeded deal")
            if event.forced_lead is not None:
                found.add("forced lead")
        elif isinstance(event, TurnTimedOut):
            timed_out.add(event.seat)
            if isinstance(after, TilePlayed | TileDrawn | TurnPassed):
                found.add("timeout then default move")
            if isinstance(after, TileDrawn):
                found.add("timeout draws")
        elif isinstance(event, TileDrawn):
            found.add("draw")
        elif isinstance(event, TurnPassed):
            found.add("pass")
        elif isinstance(event, TilePlayed) and event.points:
            found.add("points in play")
        elif isinstance(event, RoundEnded):
            found.add(f"round ended: {event.outcome}")
            if rules.partners:
                found.add(f"{family} partners round ended: {event.outcome}")
            if event.outcome == "blocked" and _blocked_tie(rules, event):
                found.add("blocked round tied")
        elif isinstance(event, MatchEnded):
            found.add(f"match ended: {event.reason}")
            if event.reason == "rounds" and len(set(event.scores)) == 1:
                found.add("round cap with tied scores")
            if event.reason == "aborted" and event.resigned in timed_out:
                found.add("abort after a default move")
    return found


REQUIRED = {
    **{f"{f} {n} players": "C3" for f in ("express", "straight") for n in (2, 3, 4)},
    **{f"{f} double-{top}": "C1" for f in ("express", "straight") for top in (6, 9, 12)},
    "express partners": "C3",
    "straight partners": "C3",
    "express partners round ended: domino": "E4: a pair scores all four hands",
    "express partners round ended: blocked": "E5: a pair's count is both partners'",
    "straight partners round ended: domino": "S5: the partner's tiles are not counted",
    "forced lead": "E2",
    "pass": "E1, S3",
    "draw": "S3",
    "points in play": "S4",
    "round ended: domino": "E4, S5",
    "round ended: blocked": "C10, E5, S6",
    "blocked round tied": "C7, E5",
    "round ended: target": "C9: the target reached in the middle of a round",
    "round ended: resigned": "README, resigning",
    "round ended: forfeit": "README, forfeit",
    "round ended: aborted": "README, aborting",
    "round ended: cancelled": "README, cancelling",
    "match ended: target": "C9",
    "match ended: resigned": "README, resigning",
    "match ended: forfeit": "README, forfeit",
    "match ended: rounds": "README, round cap",
    "match ended: aborted": "README, aborting",
    "match ended: cancelled": "README, cancelling",
    "round cap with tied scores": "README, round cap; C7 (the nearest thing to a draw)",
    "timeout then default move": "README, timeouts",
    "timeout draws": "README, timeouts; S3",
    "abort after a default move": "README, aborting",
    "seeded deal": "F1",
    "unseeded deal": "F1: a deal made without a seed is accepted, and reported unchecked",
}
"""Every case a corpus must hold at least once, with the rule it exercises."""
REQUIRED_FROM: dict[str, str] = {}
"""Cases added to :data:`REQUIRED` after some corpora were written, with the first corpus
that must hold them: the older ones stay as they are."""


# ---------------------------------------------------------------------------------------------
# the corpus on disk


CORPUS_NAME = re.compile(r"(\d+)(?:\.(\d+))?")
"""A corpus directory's name: the schema that wrote it (``1``), then, for a later release that
changed a stored shape without raising the schema (a field added with a default), a count
(``1.1``, ``1.2`` …)."""


def corpus_key(name: str) -> tuple[int, int] | None:
    """The order of a corpus directory's name (schema, count), None when it is no corpus's."""
    found = CORPUS_NAME.fullmatch(name)
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2) or 0)


def corpora() -> list[Path]:
    """Every corpus directory, one per release that changed a stored shape, oldest first."""
    if not CORPUS.is_dir():
        return []
    found = [d for d in CORPUS.iterdir() if d.is_dir() and corpus_key(d.name) is not None]
    return sorted(found, key=lambda d: corpus_key(d.name) or (0, 0))


def matches(corpus: Path) -> list[Path]:
    """The match directories of one corpus."""
    return sorted(d for d in corpus.iterdir() if d.is_dir())


def expected_of(match: Path) -> Facts:
    """A match's ``expected.json``."""
    loaded: Facts = json.loads((match / EXPECTED).read_text())
    return loaded


def redis_entries(match: Path) -> list[dict[str, str]]:
    """A match's Redis form: its stream entries, one JSON object a line."""
    return [json.loads(line) for line in (match / REDIS).read_text().splitlines()]


def _name(match: Path) -> str:
    return f"{match.parent.name}/{match.name}"


MATCHES = [match for corpus in corpora() for match in matches(corpus)]
CASES = [
    pytest.param(match, form, id=f"{_name(match)}/{form}") for match in MATCHES for form in FORMS
]


async def read_form(
    match: Path, form: str, request: pytest.FixtureRequest, tmp_path: Path
) -> list[Envelope]:
    """A match's log as today's readers give it from one of its stored forms."""
    match_id: str = expected_of(match)["match_id"]
    if form == "export":
        return jsonl.read(match / EXPORT, match_id)
    records: list[Recorded]
    if form == "archive":
        archive = DirectoryArchive(tmp_path / "archive")
        await archive.put(match_id, (match / ARCHIVE).read_bytes())
        records = await MatchSource(MemoryEventStore(), archive).read(match_id)
    elif form == "memory":
        memory = MemoryEventStore()
        stored = [NewEvent(e["type"], e["data"].encode()) for e in redis_entries(match)]
        await memory.append(match_id, stored, 0, f"golden:{match_id}")
        records = await memory.read(match_id)
    else:
        records = await _through_redis(match, match_id, request)
    tags = [json.loads(r.data)["event"]["type"] for r in records]
    assert [r.type for r in records] == tags, "each record's type names its stored event"
    assert [r.version for r in records] == list(range(1, len(records) + 1))
    return jsonl.parse([r.data for r in records], match_id)


async def _through_redis(
    match: Path, match_id: str, request: pytest.FixtureRequest
) -> list[Recorded]:
    """The entries written into the match's stream on a real Redis, as the append script
    writes them (XADD <key> 0-<version> type … __data__ …), and read back by the store."""
    url: str = request.getfixturevalue("redis_url")
    prefix: str = request.getfixturevalue("key_prefix")
    store = RedisEventStore(node_client(url), prefix=prefix)
    key = store.keys.match(match_id)
    try:
        for entry in redis_entries(match):
            fields = {"type": entry["type"], "__data__": entry["data"]}
            await store.client.xadd(key, fields, id=entry["id"])  # type: ignore[arg-type]
        return await MatchSource(store).read(match_id)
    finally:
        await store.client.delete(key)
        await store.aclose()


# ---------------------------------------------------------------------------------------------
# the tests


def test_there_is_a_corpus_and_each_holds_matches() -> None:
    """A corpus directory for today's schema at least, none of them empty."""
    found = corpora()
    assert found, f"no corpus under {CORPUS}"
    for corpus in found:
        assert matches(corpus), f"corpus {corpus.name} holds no match"


@pytest.mark.anyio
@pytest.mark.parametrize(("match", "form"), CASES)
async def test_every_form_of_every_match_replays_to_its_recorded_rounds_and_result(
    match: Path, form: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Decoded by today's readers and folded by today's engine, every stored form gives the
    rounds, the result and the verdicts recorded when the match was written."""
    expected = expected_of(match)
    log = await read_form(match, form, request, tmp_path)
    assert [e.match_id for e in log] == [expected["match_id"]] * len(log)
    got = replay(log)
    recorded = expected["rounds"]
    for facts, want in zip(got.rounds, recorded, strict=False):
        assert facts == want["facts"], f"round {want['facts']['round']}"
        assert digest(facts) == want["digest"], f"round {facts['round']}: digest"
    assert len(got.rounds) == len(recorded), "rounds played"
    assert got.final == expected["final"]["facts"]
    assert digest(got.final) == expected["final"]["digest"]
    assert answers([e.event for e in log]) == expected["answers"]


@pytest.mark.parametrize("match", [pytest.param(m, id=_name(m)) for m in MATCHES])
def test_domino_verify_answers_every_export_as_it_did_when_written(
    match: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ``domino verify`` command, run in this process: the same exit code and verdict
    lines, rules (C1-C10, E, S) and fairness (F1) alike."""
    recorded = expected_of(match)["cli"]
    for name, flags in CLI_CHECKS.items():
        code = domino(["verify", "--file", str(match / EXPORT), *flags])
        out, err = capsys.readouterr()
        answer = {"exit": code, "stdout": out.splitlines(), "stderr": err.splitlines()}
        assert answer == recorded[name], name


def _seeded_and_unseeded(corpus: Path) -> list[Path]:
    """The first match whose deals check out and the first whose do not (F1)."""
    picked: dict[int, Path] = {}
    for match in matches(corpus):
        picked.setdefault(expected_of(match)["cli"]["verify --fairness"]["exit"], match)
    return [picked[code] for code in sorted(picked)]


@pytest.mark.parametrize(
    "match",
    [pytest.param(m, id=_name(m)) for corpus in corpora() for m in _seeded_and_unseeded(corpus)],
)
def test_the_domino_command_in_a_process_of_its_own_answers_as_recorded(match: Path) -> None:
    """The installed ``domino`` command, as a person runs it, on a match whose deals check out
    and on one dealt without a seed (F1): the answers the in-process runs are compared with."""
    command = [str(Path(sys.executable).with_name("domino")), "verify", "--file", EXPORT]
    ran = subprocess.run(
        [*command, "--fairness"], cwd=match, capture_output=True, text=True, timeout=60
    )
    answer = {"exit": ran.returncode, "stdout": ran.stdout.splitlines()}
    answer["stderr"] = ran.stderr.splitlines()
    assert answer == expected_of(match)["cli"]["verify --fairness"]


@pytest.mark.parametrize("corpus", [pytest.param(c, id=c.name) for c in corpora()])
def test_each_corpus_covers_every_case_the_promise_is_about(corpus: Path) -> None:
    """Read from the logs themselves: both families with 2, 3 and 4 players and partners, the
    three sets, every way a round and a match end, timeouts, ties, seeded and unseeded deals."""
    found: set[str] = set()
    for match in matches(corpus):
        found |= features([e.event for e in jsonl.read(match / EXPORT)])
    written = corpus_key(corpus.name) or (0, 0)
    required = {
        case: rule
        for case, rule in REQUIRED.items()
        if case not in REQUIRED_FROM or written >= (corpus_key(REQUIRED_FROM[case]) or (0, 0))
    }
    missing = {case: rule for case, rule in required.items() if case not in found}
    assert not missing, f"corpus {corpus.name} lacks: {missing}"


@pytest.mark.parametrize("corpus", [pytest.param(c, id=c.name) for c in corpora()])
def test_a_corpus_is_exactly_the_files_its_manifest_lists(corpus: Path) -> None:
    """A corpus is never edited: every file is the one it was written as (its SHA-256), and
    nothing was added or taken away."""
    manifest = json.loads((corpus / MANIFEST).read_text())
    schema = (corpus_key(corpus.name) or (0, 0))[0]
    assert manifest["schema"] == schema, "the schema that wrote it names the directory"
    files = {
        str(p.relative_to(corpus)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(corpus.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    assert files == manifest["files"]
    for match in matches(corpus):
        stored = [json.loads(line) for line in (match / EXPORT).read_text().splitlines()]
        assert {envelope["schema"] for envelope in stored} == {schema}, match.name


def test_the_generator_refuses_to_write_over_a_corpus(tmp_path: Path) -> None:
    """A corpus is never regenerated: the generator stops before writing anything."""
    from tests.golden import make_corpus

    existing = tmp_path / "1"
    existing.mkdir()
    (existing / "keep").write_text("kept")
    assert make_corpus.main(["--out", str(existing)]) == 2
    assert [p.name for p in existing.iterdir()] == ["keep"]
