"""Write a golden corpus of match logs with today's code: ``python -m tests.golden.make_corpus``.

It writes ``tests/golden/corpus/<SCHEMA>/`` (``events.envelope.SCHEMA``) and refuses when that
directory exists: a corpus is written once, by the release whose stored shapes it keeps, and
never again (README.md here). ``--out DIR`` writes to another directory, which must not exist
either (to add the corpus of a new schema under another name, or to compare a run with the
committed corpus).

Every match is played as the service plays it, and the same on every run: each command — a
house bot's or an outside player's move, the referee's timeout, a resignation, an abort, the
operator's cancel — goes through the referee's pure decision (``decide_command``, which deals
each round it opens from the referee's dealer, here with a seeded generator), on a fixed clock
and with the command ids the service gives such commands, and is stored by the append the
referee makes (``append_request``) in a ``RedisEventStore`` on a private redis-server. One match
is dealt as a referee dealt before seeds existed (F1): the engine's ``DealRound`` without one.
Each plan names what its match must show; the first variant (bots' and dealer's seeds) that
shows it is kept. Then every match is read back in each form the service keeps it, folded into
its expected rounds and result (the digests of ``test_corpus.py``), and the real ``domino
verify`` is run on its export.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.game import decide, evolve
from engine.rules import Rules
from engine.state import MatchState
from engine.strategy import make_strategy
from engine.tiles import full_set
from engine.views import view_for
from events.envelope import SCHEMA, CommandEnvelope
from events.model import (
    Abort,
    AnyCommand,
    AnyEvent,
    CancelMatch,
    CreateMatch,
    DealRound,
    Rejection,
    Resign,
    RoundStarted,
    TimeOutTurn,
)
from services.cli import jsonl
from services.core.decision import Decision, append_request, decide_command
from services.redis.connection import node_client
from services.redis.servers import private_server
from services.store import ConcurrencyError, RedisEventStore
from services.store.archive import encode_log
from services.store.base import Recorded
from tests.golden.test_corpus import (
    ARCHIVE,
    CLI_CHECKS,
    CORPUS,
    EXPECTED,
    EXPORT,
    MANIFEST,
    REDIS,
    answers,
    corpus_key,
    digest,
    features,
    replay,
)

EPOCH = 1_767_225_600.0
"""When every match of the corpus begins (2026-01-01T00:00:00Z): the envelopes' ``ts``."""
TICK = 0.75
"""Seconds between two commands of a match."""
VARIANTS = 5000
"""How many variants of a plan are played, at most, to find one that shows what it must."""
MOST_COMMANDS = 3000
"""A match longer than this is a bug of the generator."""


@dataclass(frozen=True)
class Turn:
    """A seat's turn as a plan's hook sees it: ``in_round`` and ``in_match`` count the seat's
    turns so far, this one included (a Straight draw keeps the turn)."""

    round: int
    seat: int
    in_round: int
    in_match: int


Hook = Callable[[MatchState, Turn], AnyCommand | None]
"""What to send instead of the seat's move at the start of a turn, if anything."""


def _no_hook(state: MatchState, turn: Turn) -> AnyCommand | None:
    return None


def timeout(state: MatchState) -> TimeOutTurn:
    """The referee's timeout of the turn being played."""
    return TimeOutTurn(seat=state.turn, version=state.version)


@dataclass(frozen=True)
class Plan:
    """One match of the corpus: its rules and seats, what it must show (``features``), and
    what is sent instead of a move at chosen turns."""

    name: str
    covers: str
    rules: Rules
    seats: tuple[str | None, ...]
    """The house bot pool of each seat; None: an outside player, through the gateway."""
    wants: frozenset[str]
    rounds: int
    """The most rounds the match may take (the corpus stays small)."""
    least: int = 1
    """The fewest rounds it must take."""
    hook: Hook = _no_hook
    deadline_ms: int = 0
    forfeit_after: int = 0
    max_rounds: int = 0
    seeded: bool = True


def _p1_timeouts(state: MatchState, turn: Turn) -> AnyCommand | None:
    """Seat 1 runs out of time on every third turn: never twice in a row, so never forfeits."""
    return timeout(state) if turn.seat == 1 and turn.in_match % 3 == 2 else None


def _p3_resign(state: MatchState, turn: Turn) -> AnyCommand | None:
    """Seat 3 resigns for its pair at its second turn of round 2."""
    return Resign(seat=3) if (turn.round, turn.seat, turn.in_round) == (2, 3, 2) else None


def _p6_forfeit(state: MatchState, turn: Turn) -> AnyCommand | None:
    """Seat 2 times out once in round 1 (then plays again itself), then twice in a row in
    round 2: the second forfeits (forfeit_after 2)."""
    due = {(1, 2), (2, 1), (2, 2)}
    return timeout(state) if turn.seat == 2 and (turn.round, turn.in_round) in due else None


def _p7_abort(state: MatchState, turn: Turn) -> AnyCommand | None:
    """The seat after the leader times out on its first turn; two turns later it aborts: the
    move played for it is not its own, so the abort is allowed."""
    n = state.rules.players
    late, aborter = (state.leader + 1) % n, (state.leader + 3) % n
    if turn.round != 1 or turn.in_round != 1:
        return None
    if turn.seat == late:
        return timeout(state)
    return Abort(seat=late) if turn.seat == aborter else None


def _p10_cancel(state: MatchState, turn: Turn) -> AnyCommand | None:
    """The operator cancels the match at the leader's third turn of round 2."""
    second_round = turn.round == 2 and turn.seat == state.leader
    return CancelMatch() if second_round and turn.in_round == 3 else None


PLANS = (
    Plan(
        name="express-2p-d6-timeouts",
        covers="Express, 2 players, double-six (C1, C3); E2's forced lead; rounds won by "
        "domino (E4) and blocked (C10, E5); passes (E1); seat 1 timed out on every third "
        "turn, each followed by its default move (README, timeouts), never forfeiting; to "
        "the target (C9)",
        rules=Rules.make("express", players=2, target=50),
        seats=("greedy", "random"),
        wants=frozenset(
            {
                "round ended: domino",
                "round ended: blocked",
                "timeout then default move",
                "pass",
                "match ended: target",
            }
        ),
        rounds=5,
        hook=_p1_timeouts,
        deadline_ms=10_000,
        forfeit_after=3,
    ),
    Plan(
        name="express-3p-d9-tied-block",
        covers="Express, 3 players, double-nine (C1, C3), next_leader rotate (E3); a blocked "
        "round whose lowest count two seats share, won by the one nearest the hand (C7, E5); "
        "to the target (C9)",
        rules=Rules.make("express", players=3, top=9, target=60, next_leader="rotate"),
        seats=("random", "random", "greedy"),
        wants=frozenset({"blocked round tied", "match ended: target"}),
        rounds=6,
    ),
    Plan(
        name="express-4p-pairs-d6-resigned",
        covers="Express, 4 players in pairs, double-six: every tile dealt, 6-6 leads (C3, E2); "
        "round 1 scored for a pair (E4, E5); seat 3, an outside player, resigns at its second "
        "turn of round 2: the round ends with every hand shown, the other pair wins (README, "
        "resigning)",
        rules=Rules.make("express", players=4),
        seats=("greedy", "random", "greedy", None),
        wants=frozenset({"match ended: resigned", "forced lead"}),
        rounds=2,
        hook=_p3_resign,
    ),
    Plan(
        name="express-4p-pairs-d12-target",
        covers="Express, 4 players in pairs, double-twelve (C1, C3): 63 tiles sleeping (C5); "
        "a pair scores all four hands (E4, E5); to the target (C9)",
        rules=Rules.make("express", players=4, top=12, target=250),
        seats=("greedy", "random", "random", "greedy"),
        wants=frozenset({"express partners round ended: domino", "match ended: target"}),
        rounds=3,
        least=2,
    ),
    Plan(
        name="straight-2p-d6-target-midround",
        covers="Straight, 2 players, double-six (C1, C3); draws (S3), all-fives points in play "
        "(S4); the target reached by a play in the middle of a round, which ends there with "
        "nothing more scored (C9)",
        rules=Rules.make("straight", players=2, target=60),
        seats=("greedy", "random"),
        wants=frozenset({"round ended: target", "draw", "points in play"}),
        rounds=4,
    ),
    Plan(
        name="straight-3p-d9-forfeit",
        covers="Straight, 3 players, double-nine (C1, C3); seat 2 times out in round 1 and "
        "its default move draws until it can play (README, timeouts; S3), then plays itself; "
        "in round 2 it times out twice in a row and forfeits (forfeit_after 2; README, "
        "forfeit): the round ends with every hand shown and nothing scored",
        rules=Rules.make("straight", players=3, top=9),
        seats=("random", "greedy", "random"),
        wants=frozenset({"match ended: forfeit", "timeout draws"}),
        rounds=2,
        hook=_p6_forfeit,
        deadline_ms=8_000,
        forfeit_after=2,
    ),
    Plan(
        name="straight-4p-d12-aborted",
        covers="Straight, 4 players without partners, double-twelve (C1, C3), every seat an "
        "outside player; the seat after the leader times out on its first turn, then aborts "
        "(the move played for it is not its own): the match ends with no winner (README, "
        "aborting)",
        rules=Rules.make("straight", players=4, top=12),
        seats=(None, None, None, None),
        wants=frozenset({"match ended: aborted", "abort after a default move"}),
        rounds=1,
        hook=_p7_abort,
        deadline_ms=30_000,
    ),
    Plan(
        name="straight-4p-pairs-d6-tied-rounds",
        covers="Straight, 4 players in pairs, double-six (C3, S5, S6); a round cap of 2 "
        "(max_rounds) reached with both pairs on the same score: the nearest thing to a draw "
        "these rules have (C9 allows no tie at the target), won by the pair nearest the last "
        "round's hand (README, round cap; C7)",
        rules=Rules.make("straight", players=4, partners=True),
        seats=("greedy", "random", "greedy", "random"),
        wants=frozenset({"round cap with tied scores"}),
        rounds=2,
        max_rounds=2,
    ),
    Plan(
        name="straight-3p-d6-unseeded",
        covers="Straight, 3 players, double-six; every round dealt without a seed, as before "
        "F1 (the first leader drawn by the referee, S1): the rules verify, the fairness check "
        "reports the deals unchecked (F1); to the target (C9)",
        rules=Rules.make("straight", players=3, target=100),
        seats=("greedy", "greedy", "random"),
        wants=frozenset({"unseeded deal", "match ended: target"}),
        rounds=4,
        least=2,
        seeded=False,
    ),
    Plan(
        name="straight-2p-d12-cancelled",
        covers="Straight, 2 players, double-twelve, reveal_stock (C1, C8): the stock shown at "
        "each round's end; the operator cancels the match in round 2 (CancelMatch): no "
        "winner (README, cancelling)",
        rules=Rules.make("straight", players=2, top=12, reveal_stock=True),
        seats=("random", "greedy"),
        wants=frozenset({"match ended: cancelled"}),
        rounds=2,
        hook=_p10_cancel,
    ),
)


# ---------------------------------------------------------------------------------------------
# playing


def _command_id(match_id: str, state: MatchState, command: AnyCommand) -> str:
    """The id the service gives a command sent instead of a move (services/referee,
    services/gateway)."""
    if isinstance(command, TimeOutTurn):
        return f"timeout:{state.version}"
    if isinstance(command, CancelMatch):
        return f"cancel:{match_id}"
    if isinstance(command, Resign | Abort):
        return f"gw:{command.seat}:{command.__struct_config__.tag}"
    raise ValueError(f"no command id for {command!r}")


def _unseeded_deal(state: MatchState, rng: random.Random) -> DealRound:
    """A deal as a referee made it before F1: a shuffle and, in Straight's first round, the
    first leader's draw (S1), with no seed."""
    rules = state.rules
    order = list(full_set(rules.top))
    rng.shuffle(order)
    first = rng.randrange(rules.players) if rules.family == "straight" else None
    return DealRound(order=tuple(order), first_leader=first if state.round == 0 else None)


def _decide_unseeded(
    state: MatchState | None, envelope: CommandEnvelope, now: float, rng: random.Random
) -> Decision | Rejection:
    """What ``decide_command`` decides, with the deals made without a seed (an older
    referee's append: the events alone, no turn message or deadline)."""
    decided = decide(state, envelope.command)
    if isinstance(decided, Rejection):
        return decided
    events = list(decided)
    after = None if state is None else state.copy()
    for event in decided:
        after = evolve(after, event)
    if after is None:
        raise RuntimeError(f"{envelope.command!r} made no events")
    while after.phase == "dealing":
        dealt = decide(after, _unseeded_deal(after, rng))
        if isinstance(dealt, Rejection):
            raise RuntimeError(f"the engine refused an unseeded deal: {dealt.message}")
        events.extend(dealt)
        for event in dealt:
            after = evolve(after, event)
    return Decision(
        envelope=envelope,
        expected_version=0 if state is None else state.version,
        events=tuple(events),
        state=after,
        turn=None,
        deadline_ms=None,
        new_turn=False,
        now=now,
    )


def play(plan: Plan, variant: int) -> list[Decision]:
    """Play one variant of a plan to its end: the referee's decision of every command."""
    match_id = plan.name
    rng = random.Random(f"{plan.name}:{variant}")  # the dealer's: str seeds are stable
    bots = [make_strategy(pool or "greedy", rng.randrange(2**32)) for pool in plan.seats]
    players = tuple(pool or f"guest{seat}" for seat, pool in enumerate(plan.seats))
    command: AnyCommand = CreateMatch(
        rules=plan.rules,
        players=players,
        bots=plan.seats,
        deadline_ms=plan.deadline_ms,
        forfeit_after=plan.forfeit_after,
        max_rounds=plan.max_rounds,
    )
    command_id = f"create:{match_id}"
    decisions: list[Decision] = []
    state: MatchState | None = None
    turns: Counter[tuple[int, int]] = Counter()
    in_match: Counter[int] = Counter()
    outside: Counter[int] = Counter()
    last: tuple[int, int] | None = None
    while len(decisions) < MOST_COMMANDS:
        now = EPOCH + TICK * len(decisions)
        envelope = CommandEnvelope(
            match_id=match_id, command_id=command_id, command=command, ts=now
        )
        if plan.seeded:
            referee = isinstance(command, TimeOutTurn)
            decided = decide_command(state, envelope, now=now, rng=rng, from_stream=not referee)
        else:
            decided = _decide_unseeded(state, envelope, now, rng)
        if isinstance(decided, Rejection):
            raise RuntimeError(f"{match_id}: {command!r} refused: {decided.message}")
        decisions.append(decided)
        state = decided.state
        if state.phase == "over":
            return decisions
        seat = state.turn
        here = (state.round, seat)
        hooked = None
        if here != last:  # a new turn (a draw keeps the turn)
            turns[here] += 1
            in_match[seat] += 1
            hooked = plan.hook(state, Turn(state.round, seat, turns[here], in_match[seat]))
        last = here
        if hooked is not None:
            command, command_id = hooked, _command_id(match_id, state, hooked)
        elif plan.seats[seat] is None:  # an outside player's move comes through the gateway
            outside[seat] += 1
            command = bots[seat].choose(view_for(state, seat))
            command_id = f"gw:{seat}:move-{outside[seat]}"
        else:  # a house bot answers its turn message
            command = bots[seat].choose(view_for(state, seat))
            command_id = f"turn:{state.version}:{seat}"
    raise RuntimeError(f"{match_id}: no end after {MOST_COMMANDS} commands")


def events_of(decisions: Sequence[Decision]) -> list[AnyEvent]:
    """Every event the decisions made, in order."""
    return [event for d in decisions for event in d.events]


def find(plan: Plan) -> list[Decision]:
    """The first variant of the plan whose match shows everything it wants in few rounds."""
    for variant in range(VARIANTS):
        decisions = play(plan, variant)
        events = events_of(decisions)
        rounds = sum(isinstance(e, RoundStarted) for e in events)
        if plan.wants <= features(events) and plan.least <= rounds <= plan.rounds:
            return decisions
    raise RuntimeError(f"{plan.name}: none of {VARIANTS} variants shows {sorted(plan.wants)}")


# ---------------------------------------------------------------------------------------------
# storing and writing


@dataclass(frozen=True)
class Stored:
    """A match as the service keeps it: its stream's entries and the records read back."""

    entries: list[dict[str, str]]
    records: list[Recorded]


async def store(decisions: Sequence[Decision], url: str) -> Stored:
    """Append every decision as the referee does, then read the match's stream back raw
    (XRANGE) and through the store."""
    redis = RedisEventStore(node_client(url), prefix="golden")
    keys = redis.keys
    match_id = decisions[0].match_id
    partition = keys.partition_of(match_id)
    try:
        for decision in decisions:
            [result] = await redis.append_many([append_request(decision, keys, partition)])
            if isinstance(result, ConcurrencyError) or result.duplicate:
                raise RuntimeError(f"{match_id}: {decision.envelope.command_id}: {result}")
        raw = await redis.read_stream(keys.match(match_id))  # XRANGE, the entries as stored
        entries = [
            {
                "id": entry.position,
                "type": entry.fields[b"type"].decode(),
                "data": entry.fields[b"__data__"].decode(),
            }
            for entry in raw
        ]
        return Stored(entries, await redis.read(match_id))
    finally:
        await redis.aclose()


def _domino() -> list[str]:
    installed = Path(sys.executable).with_name("domino")
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "services.cli.main"]


def run_cli(match_dir: Path, flags: Sequence[str]) -> dict[str, Any]:
    """The real ``domino verify --file export.jsonl``: its exit code and every line."""
    ran = subprocess.run(
        [*_domino(), "verify", "--file", EXPORT, *flags],
        cwd=match_dir,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return {
        "exit": ran.returncode,
        "stdout": ran.stdout.splitlines(),
        "stderr": ran.stderr.splitlines(),
    }


def pretty(value: Any, depth: int = 0) -> str:
    """JSON laid out for diffs: nested to three levels, each deeper value on one line."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if depth < 3 and isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {pretty(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if depth < 3 and isinstance(value, list) and value:
        items = [f"{inner}{pretty(v, depth + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(value, sort_keys=True)


def write_match(plan: Plan, stored: Stored, directory: Path) -> None:
    """Write one match's forms and its expected results under ``directory``."""
    match_id = plan.name
    directory.mkdir(parents=True)
    records = stored.records
    envelopes = jsonl.parse([r.data for r in records], match_id)  # as ``domino export`` does
    jsonl.write(directory / EXPORT, envelopes)
    archived = encode_log(records)  # as the archiver does
    (directory / ARCHIVE).write_bytes(archived)
    lines = "".join(json.dumps(entry) + "\n" for entry in stored.entries)
    (directory / REDIS).write_text(lines)
    exported = (directory / EXPORT).read_bytes()
    if gzip.decompress(archived) != exported or b"".join(r.data + b"\n" for r in records) != (
        exported
    ):
        raise RuntimeError(f"{match_id}: the export, the archive and the store disagree")
    replayed = replay(envelopes)
    expected = {
        "match_id": match_id,
        "schema": SCHEMA,
        "covers": plan.covers,
        "rounds": [{"digest": digest(f), "facts": f} for f in replayed.rounds],
        "final": {"digest": digest(replayed.final), "facts": replayed.final},
        "answers": answers([e.event for e in envelopes]),
        "cli": {name: run_cli(directory, flags) for name, flags in CLI_CHECKS.items()},
    }
    (directory / EXPECTED).write_text(pretty(expected) + "\n")


def write_manifest(corpus: Path) -> None:
    """The SHA-256 of every file of the corpus, so that an edit is seen."""
    files = {
        str(p.relative_to(corpus)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(corpus.rglob("*"))
        if p.is_file()
    }
    manifest = {"schema": SCHEMA, "files": files}
    (corpus / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


async def _store_all(found: Sequence[tuple[Plan, list[Decision]]], url: str) -> list[Stored]:
    return [await store(decisions, url) for _, decisions in found]


def _following(name: str) -> Path:
    """The directory for the next corpus of today's schema, after ``name``."""
    taken = {corpus_key(d.name) for d in CORPUS.iterdir()} if CORPUS.is_dir() else set()
    key = corpus_key(name)
    count = 1 + max([c for s, c in (k for k in taken if k) if s == SCHEMA] or [0])
    if key is not None and key[0] == SCHEMA:
        count = max(count, key[1] + 1)
    return CORPUS / f"{SCHEMA}.{count}"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the corpus; 2 (nothing written) when its directory exists."""
    parser = argparse.ArgumentParser(prog="python -m tests.golden.make_corpus")
    parser.add_argument(
        "--out", help=f"write here instead of {CORPUS}/{SCHEMA} (must not exist either)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else CORPUS / str(SCHEMA)
    if out.exists():
        following = _following(out.name)
        print(
            f"{out} exists: a corpus is written once and never again (tests/golden/README.md); "
            f"a release that changed a stored shape adds the next one: --out {following}",
            file=sys.stderr,
        )
        return 2
    key = corpus_key(out.name)
    if out.resolve().parent == CORPUS.resolve() and (key is None or key[0] != SCHEMA):
        print(
            f"{out}: a corpus written with schema {SCHEMA} is named {SCHEMA} or {SCHEMA}.N",
            file=sys.stderr,
        )
        return 2
    partial = out.with_name(f".{out.name}.partial")
    if partial.exists():
        shutil.rmtree(partial)  # what a run that failed left
    found = [(plan, find(plan)) for plan in PLANS]
    with private_server(appendfsync="no") as url:
        stored = asyncio.run(_store_all(found, url))
    for (plan, _), match in zip(found, stored, strict=True):
        write_match(plan, match, partial / plan.name)
        print(f"{plan.name}: {len(match.entries)} events")
    write_manifest(partial)
    partial.rename(out)
    print(f"corpus of schema {SCHEMA} written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
