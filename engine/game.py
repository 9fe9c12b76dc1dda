"""The rules as two pure functions: ``decide`` (command → events or a rejection) and ``evolve``.

Nothing here reads a clock, draws a random number or does I/O: the shuffled deal and the first
leader's draw arrive in a ``DealRound`` command and are recorded in ``RoundStarted``, so a match
replays exactly from its events alone. Rule numbers refer to RULES.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from engine.board import END_INDEX, Board
from engine.fairness import (
    SALT_BYTES,
    SEED_BYTES,
    SeedError,
    commitment,
    parse_hex,
    seeded_deal,
    split_deal,
)
from engine.rules import HAND_SIZE, round5
from engine.state import MatchState
from engine.tiles import format_tile, is_double, pips, tile, tile_set, weight
from events.model import (
    Abort,
    AnyCommand,
    AnyEvent,
    CancelMatch,
    CreateMatch,
    DealRound,
    DrawTile,
    MatchCreated,
    MatchEnded,
    Move,
    Outcome,
    PassTurn,
    PlayTile,
    Reason,
    Rejection,
    Resign,
    RoundEnded,
    RoundStarted,
    TileDrawn,
    TilePlayed,
    TimeOutTurn,
    TurnPassed,
    TurnTimedOut,
)
from events.vocabulary import ACCOUNT_ID, END_NAMES, POOL_NAME, RulesError, Tile

MAX_NAME = 64
MAX_DEADLINE_MS = 86_400_000

Stop = Literal["resigned", "forfeit", "aborted", "cancelled"]
"""The ways a match stops short of its end: each is the outcome of the round it cuts off and
the reason the match ended."""


class FoldError(ValueError):
    """Raised by ``evolve`` when an event cannot follow the state (a corrupt or foreign log)."""


class IllegalMove(ValueError):
    """Raised by :func:`apply` when the engine rejects a command; carries the rejection."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.reason} ({rejection.rule}): {rejection.message}")
        self.rejection = rejection


def _reject(reason: Reason, rule: str, message: str) -> Rejection:
    return Rejection(reason=reason, rule=rule, message=message)


# ---------------------------------------------------------------------------------------------
# decide


def decide(state: MatchState | None, command: AnyCommand) -> list[AnyEvent] | Rejection:
    """The events ``command`` produces from ``state``, or a rejection naming the rule broken."""
    if isinstance(command, CreateMatch):
        return _create(state, command)
    if state is None:
        return _reject("no_match", "-", "no such match: create it first")
    if isinstance(command, DrawTile) and state.rules.family == "express":
        return _reject("draw_in_express", "E1", "there is no drawing in Express")
    if state.phase == "over":
        return _reject("match_over", "C9", "the match is over")
    if isinstance(command, CancelMatch):
        return _stop(state, None, "cancelled", None)
    if isinstance(command, DealRound):
        return _deal(state, command)
    seat = command.seat
    if not 0 <= seat < state.rules.players:
        return _reject("no_such_seat", "C3", f"seat {seat} does not exist")
    if isinstance(command, Resign):
        return _concede(state, seat, "resigned")
    if isinstance(command, Abort):
        return _abort(state, seat)
    if state.phase != "playing":
        return _reject("round_over", "C10", "the round has ended; wait for the next deal")
    if seat != state.turn:
        return _reject("not_your_turn", "C4", f"it is seat {state.turn}'s turn, not seat {seat}'s")
    if isinstance(command, TimeOutTurn):
        return _timeout(state, command)
    return _move(state, command)


def apply(state: MatchState | None, command: AnyCommand) -> tuple[MatchState, list[AnyEvent]]:
    """Decide and fold in one step; raise IllegalMove if the command is rejected."""
    result = decide(state, command)
    if isinstance(result, Rejection):
        raise IllegalMove(result)
    folded = evolve(state, result[0])  # an accepted command records at least one event
    for event in result[1:]:
        folded = evolve(folded, event)
    return folded, result


def _create(state: MatchState | None, command: CreateMatch) -> list[AnyEvent] | Rejection:
    if state is not None:
        return _reject("match_exists", "-", "the match already exists")
    try:
        command.rules.validate()
    except RulesError as e:
        return _reject("bad_rules", e.rule, str(e))
    players = command.players
    if len(players) != command.rules.players:
        return _reject(
            "bad_players",
            "C3",
            f"{command.rules.players} players needed, {len(players)} named",
        )
    if any(not p.strip() or len(p) > MAX_NAME for p in players):
        return _reject("bad_players", "C3", f"player names must be 1 to {MAX_NAME} characters")
    if command.bots and len(command.bots) != len(players):
        return _reject("bad_players", "C3", "name a bot pool (or none) for every seat")
    if any(b is not None and not POOL_NAME.fullmatch(b) for b in command.bots):
        return _reject("bad_players", "C3", "bot pool names are 1-32 of a-z, 0-9, _ and -")
    if command.accounts and len(command.accounts) != len(players):
        return _reject("bad_players", "-", "name an account (or none) for every seat")
    if any(a is not None and not ACCOUNT_ID.fullmatch(a) for a in command.accounts):
        return _reject("bad_players", "-", "account ids are 1-64 of A-Z, a-z, 0-9, _ and -")
    if not 0 <= command.deadline_ms <= MAX_DEADLINE_MS:
        return _reject("bad_rules", "-", f"deadline_ms must be 0 to {MAX_DEADLINE_MS}")
    if command.forfeit_after < 0:
        return _reject("bad_rules", "-", "forfeit_after must be 0 (never) or more")
    if command.max_rounds < 0:
        return _reject("bad_rules", "-", "max_rounds must be 0 (no cap) or more")
    return [
        MatchCreated(
            rules=command.rules,
            players=players,
            bots=command.bots,
            deadline_ms=command.deadline_ms,
            accounts=command.accounts,
            forfeit_after=command.forfeit_after,
            max_rounds=command.max_rounds,
        )
    ]


def _deal(state: MatchState, command: DealRound) -> list[AnyEvent] | Rejection:
    rules = state.rules
    if state.phase != "dealing":
        return _reject("bad_deal", "C5", "a round is already being played")
    order = command.order
    whole = tile_set(rules.top)  # as many tiles as the set, and all of them: each once
    if len(order) != len(whole) or set(order) != whole:
        return _reject("bad_deal", "C1", f"the deal must be the whole double-{rules.top} set")
    n = rules.players
    sealed = _check_seed(state, command)
    if isinstance(sealed, Rejection):
        return sealed
    hands, stock = split_deal(order, n)
    forced: Tile | None = None
    if state.round == 0 and rules.family == "express":
        leader, forced = _first_express_lead(hands)  # E2
    elif state.round == 0:
        if command.first_leader is None or not 0 <= command.first_leader < n:
            return _reject("bad_deal", "S1", "the first leader's draw must name a seat")
        leader = command.first_leader  # S1: drawn at random by the referee
    else:
        after_winner = rules.family == "express" and rules.next_leader == "after_winner"
        previous = state.prev_winner if after_winner else state.prev_leader  # E3, S1
        if previous is None:  # no winner: a resigned round, and a resignation ends the match
            return _reject("bad_deal", "E3", "the last round has no seat to lead after")
        leader = (previous + 1) % n
    return [
        RoundStarted(
            round=state.round + 1,
            leader=leader,
            hands=hands,
            stock=stock,
            hand_sizes=tuple(len(h) for h in hands),
            stock_size=len(stock),
            forced_lead=forced,
            commitment=sealed,
            seed=command.seed,
            salt=command.salt,
        )
    ]


def _check_seed(state: MatchState, command: DealRound) -> str | Rejection | None:
    """F1: a seeded deal is exactly the one its seed gives; its commitment, or None for a deal
    made without a seed."""
    if command.seed is None and command.salt is None:
        return None
    if command.seed is None or command.salt is None:
        return _reject("bad_deal", "F1", "a seed comes with its salt, and a salt with its seed")
    try:
        seed = parse_hex(command.seed, SEED_BYTES, "seed")
        salt = parse_hex(command.salt, SALT_BYTES, "salt")
    except SeedError as e:
        return _reject("bad_deal", "F1", str(e))
    rules = state.rules
    seeded = seeded_deal(seed, rules.top, rules.players)
    if command.order != seeded.order:
        return _reject("bad_deal", "F1", "the order is not the one the seed gives")
    first = state.round == 0 and rules.family == "straight"
    if first and command.first_leader != seeded.first_leader:
        return _reject(
            "bad_deal",
            "F1",
            f"the first leader is seat {command.first_leader}, "
            f"the seed draws seat {seeded.first_leader} (S1)",
        )
    return commitment(seed, salt)


def _first_express_lead(hands: tuple[tuple[Tile, ...], ...]) -> tuple[int, Tile]:
    """E2: the highest double leads; with no double, the heaviest tile."""
    doubles = [(t[0], seat, t) for seat, h in enumerate(hands) for t in h if is_double(t)]
    if doubles:
        _, seat, t = max(doubles)
        return seat, t
    _, seat, t = max((weight(t), seat, t) for seat, h in enumerate(hands) for t in h)
    return seat, t


def _move(state: MatchState, command: Move) -> list[AnyEvent] | Rejection:
    seat = command.seat
    hand = state.hands[seat]
    board = state.board
    if isinstance(command, PlayTile):
        return _play(state, command)
    playable = _can_play(board, hand)
    if isinstance(command, DrawTile):
        if playable:
            return _reject("must_play", "S3", "you hold a playable tile: play it")
        if not state.stock:
            return _reject("boneyard_empty", "S3", "the boneyard is empty: pass")
        return _after_draw(state, seat, state.stock[0])
    if playable:
        return _reject(
            "must_play",
            "E1" if state.rules.family == "express" else "S3",
            "you hold a playable tile: passing is not allowed",
        )
    if state.rules.family == "straight" and state.stock:
        return _reject("must_draw", "S3", "the boneyard still has tiles: draw")
    return [TurnPassed(seat=seat)]


def _play(state: MatchState, command: PlayTile) -> list[AnyEvent] | Rejection:
    seat = command.seat
    t = tile(*command.tile)
    if t not in state.hands[seat]:
        return _reject("tile_not_in_hand", "C8", f"{format_tile(t)} is not in seat {seat}'s hand")
    board = state.board
    if board.empty:
        if command.end is not None:
            return _reject("no_such_end", "C6", "the lead is played with no end")
        if state.forced_lead is not None and t != state.forced_lead:
            return _reject(
                "must_lead_forced_tile",
                "E2",
                f"the first round must be led with {format_tile(state.forced_lead)}",
            )
        return _after_play(state, seat, t, None)
    if command.end is None:
        ends = board.ends_for(t)
        if not ends:
            return _reject("tile_does_not_match", "C6", f"{format_tile(t)} matches no open end")
        if len(ends) > 1:
            names = ", ".join(END_NAMES[i] for i in ends)
            return _reject("ambiguous_end", "C6", f"{format_tile(t)} fits {names}: name the end")
        return _after_play(state, seat, t, ends[0])
    end = END_INDEX.get(command.end, -1)
    number = board.numbers[end] if end >= 0 else None
    if number is None:
        if board.spinner is not None and command.end in ("up", "down"):
            return _reject("no_such_end", "S2", f"the {command.end} end is still closed")
        return _reject("no_such_end", "C6", f"there is no {command.end!r} end")
    if number not in t:
        return _reject(
            "tile_does_not_match", "C6", f"{format_tile(t)} does not match the {command.end} end"
        )
    return _after_play(state, seat, t, end)


def _after_play(state: MatchState, seat: int, t: Tile, end: int | None) -> list[AnyEvent]:
    rules = state.rules
    straight = rules.family == "straight"
    board = state.board.copy()
    if end is None:
        board.lead(t, spinners=straight)
    else:
        board.place(t, end, spinners=straight)
    count = board.count() if straight else 0
    points = count if count > 0 and count % 5 == 0 else 0  # S4
    name = None if end is None else END_NAMES[end]
    events: list[AnyEvent] = [TilePlayed(seat=seat, tile=t, end=name, points=points)]
    hands = list(state.hands)  # only the mover's hand changes: the others are shared, unchanged
    hands[seat] = hands[seat] - {t}
    scores = state.scores[:]
    side = rules.side_of(seat)
    scores[side] += points
    if points and scores[side] >= rules.target:  # C9: the match ends mid-round
        events.append(_round_end(state, hands, state.stock, scores, "target", seat, side, 0))
        events.append(MatchEnded(winner=side, scores=tuple(scores), reason="target"))
    elif not hands[seat]:
        events.extend(_domino(state, hands, scores, seat))
    elif (not straight or not state.stock) and not _anyone_can_play(board, hands):
        events.extend(_blocked(state, hands, state.stock, scores))  # C10
    return events


def _after_draw(state: MatchState, seat: int, drawn: Tile) -> list[AnyEvent]:
    events: list[AnyEvent] = [TileDrawn(seat=seat, tile=drawn)]
    if len(state.stock) == 1:  # the boneyard is now empty: the round may be blocked (C10)
        hands = list(state.hands)
        hands[seat] = hands[seat] | {drawn}
        if not _anyone_can_play(state.board, hands):
            events.extend(_blocked(state, hands, state.stock[1:], state.scores[:]))
    return events


def _can_play(board: Board, hand: Iterable[Tile]) -> bool:
    if board.empty:
        return True
    numbers = {n for n in board.numbers if n is not None}
    return any(a in numbers or b in numbers for a, b in hand)


def _anyone_can_play(board: Board, hands: Iterable[Iterable[Tile]]) -> bool:
    numbers = {n for n in board.numbers if n is not None}
    return any(a in numbers or b in numbers for hand in hands for a, b in hand)


def _counts(hands: list[set[Tile]]) -> list[int]:
    return [sum(pips(t) for t in h) for h in hands]


def _nearness(state: MatchState) -> list[int]:
    """Seats from the hand onwards in turn order: the tie order of C7."""
    n = state.rules.players
    return [(state.leader + i) % n for i in range(n)]


def _domino(
    state: MatchState, hands: list[set[Tile]], scores: list[int], seat: int
) -> list[AnyEvent]:
    rules = state.rules
    side = rules.side_of(seat)
    counts = _counts(hands)
    if rules.family == "express":
        points = sum(counts)  # E4: opponents' counts; with pairs all four hands
    else:
        points = round5(sum(c for s, c in enumerate(counts) if rules.side_of(s) != side))  # S5
    return _score(state, hands, state.stock, scores, "domino", seat, side, points)


def _blocked(
    state: MatchState, hands: list[set[Tile]], stock: Sequence[Tile], scores: list[int]
) -> list[AnyEvent]:
    rules = state.rules
    counts = _counts(hands)
    side_counts = [0] * rules.sides
    for s, c in enumerate(counts):
        side_counts[rules.side_of(s)] += c
    low = min(side_counts)
    order = _nearness(state)
    side = next(rules.side_of(s) for s in order if side_counts[rules.side_of(s)] == low)  # C7
    members = [s for s in order if rules.side_of(s) == side]
    winner = min(members, key=lambda s: counts[s])  # E3: lowest count, ties by C7 order
    opponents = sum(side_counts) - side_counts[side]
    if rules.family == "express":
        points = sum(counts) if rules.partners else opponents  # E5
    else:
        points = round5(opponents)  # S6
    return _score(state, hands, stock, scores, "blocked", winner, side, points)


def _score(
    state: MatchState,
    hands: list[set[Tile]],
    stock: Sequence[Tile],
    scores: list[int],
    outcome: Outcome,
    winner: int,
    side: int,
    points: int,
) -> list[AnyEvent]:
    scores[side] += points
    events: list[AnyEvent] = [
        _round_end(state, hands, stock, scores, outcome, winner, side, points)
    ]
    if scores[side] >= state.rules.target:  # C9
        events.append(MatchEnded(winner=side, scores=tuple(scores), reason="target"))
    elif state.max_rounds and state.round >= state.max_rounds:  # the round cap (README)
        best = _best_side(state, scores, None)
        events.append(MatchEnded(winner=best, scores=tuple(scores), reason="rounds"))
    return events


def _round_end(
    state: MatchState,
    hands: list[set[Tile]],
    stock: Sequence[Tile],
    scores: list[int],
    outcome: Outcome,
    winner: int | None,
    side: int | None,
    points: int,
) -> RoundEnded:
    return RoundEnded(
        round=state.round,
        outcome=outcome,
        winner=winner,
        side=side,
        points=points,
        counts=tuple(_counts(hands)),
        hands=tuple(tuple(sorted(h)) for h in hands),
        stock=tuple(stock) if state.rules.reveal_stock else None,
        scores=tuple(scores),
        seed=state.seed,  # F1: the reveal
        salt=state.salt,
    )


def _best_side(state: MatchState, scores: Sequence[int], loser: int | None) -> int:
    """The side with the highest score, ``loser`` left out; ties by nearness to the hand (C7)."""
    order = [state.rules.side_of(s) for s in _nearness(state)]
    return max((s for s in order if s != loser), key=lambda s: scores[s])  # max keeps the first


def _concede(state: MatchState, seat: int, reason: Stop) -> list[AnyEvent]:
    """The seat's side loses at once (it resigned, or forfeited by timing out); the best other
    side wins (ties by C7 order)."""
    return _stop(state, _best_side(state, state.scores, state.rules.side_of(seat)), reason, seat)


def _abort(state: MatchState, seat: int) -> list[AnyEvent] | Rejection:
    """Call the match off, unrated, if the seat's side has made no move of its own yet."""
    if state.moved[state.rules.side_of(seat)]:
        return _reject(
            "too_late_to_abort",
            "-",
            f"seat {seat}'s side has already moved: a match is aborted only before that; resign",
        )
    return _stop(state, None, "aborted", seat)


def _stop(state: MatchState, winner: int | None, reason: Stop, seat: int | None) -> list[AnyEvent]:
    """End the match now: a round in progress ends with every hand shown and nothing scored
    (C8). ``seat`` is the one that resigned, forfeited or aborted."""
    events: list[AnyEvent] = []
    if state.phase == "playing":
        hands = [set(h) for h in state.hands]
        events.append(_round_end(state, hands, state.stock, state.scores[:], reason, None, None, 0))
    events.append(
        MatchEnded(winner=winner, scores=tuple(state.scores), reason=reason, resigned=seat)
    )
    return events


def _timeout(state: MatchState, command: TimeOutTurn) -> list[AnyEvent] | Rejection:
    """The seat's default turn: draw until playable, then play the heaviest tile; else pass.
    The timeout that makes ``forfeit_after`` in a row forfeits the match instead."""
    if command.version != state.version:
        return _reject("stale_timeout", "-", "the turn this deadline was set for has passed")
    events: list[AnyEvent] = [TurnTimedOut(seat=command.seat)]
    if state.forfeit_after and state.timeouts[command.seat] + 1 >= state.forfeit_after:
        return events + _concede(state, command.seat, "forfeit")
    s = state.copy()
    evolve(s, events[0])
    while s.phase == "playing" and s.turn == command.seat:
        move = default_move(s)
        s, made = apply(s, move)  # a legal move by construction: IllegalMove here is a bug
        events.extend(made)
        if not isinstance(move, DrawTile):
            break
    return events


def default_move(state: MatchState) -> Move:
    """The move made for a seat that ran out of time: its heaviest playable tile, else the
    draw or pass the rules require (first matching end in the fixed order)."""
    moves = legal_moves(state)
    plays = [m for m in moves if isinstance(m, PlayTile)]
    if plays:
        return max(plays, key=lambda m: weight(m.tile))  # max keeps the first of equals
    return moves[0]


# ---------------------------------------------------------------------------------------------
# legal moves


def legal_moves(state: MatchState) -> list[Move]:
    """Every legal move of the seat to move, in a fixed order: tiles in canonical order, each
    on its ends in the order left, right, up, down; else the draw (S3) or the pass."""
    if state.phase != "playing":
        return []
    seat = state.turn
    board = state.board
    hand = sorted(state.hands[seat])
    if board.empty:
        if state.forced_lead is not None:
            return [PlayTile(seat=seat, tile=state.forced_lead)]
        return [PlayTile(seat=seat, tile=t) for t in hand]
    open_ends = [(END_NAMES[i], n) for i, n in enumerate(board.numbers) if n is not None]
    plays: list[Move] = [
        PlayTile(seat=seat, tile=t, end=name)
        for t in hand
        for name, n in open_ends
        if n == t[0] or n == t[1]
    ]
    if plays:
        return plays
    if state.rules.family == "straight" and state.stock:
        return [DrawTile(seat=seat)]
    return [PassTurn(seat=seat)]


def play_points(state: MatchState, move: Move) -> int:
    """What ``move`` would score during play (S4): the all-fives count if it is a positive
    multiple of 5 in Straight, else 0. The move is assumed legal."""
    if not isinstance(move, PlayTile) or state.rules.family != "straight":
        return 0
    board = state.board.copy()
    if move.end is None:
        board.lead(tile(*move.tile), spinners=True)
    else:
        board.place(tile(*move.tile), END_INDEX[move.end], spinners=True)
    count = board.count()
    return count if count > 0 and count % 5 == 0 else 0


# ---------------------------------------------------------------------------------------------
# evolve


def evolve(state: MatchState | None, event: AnyEvent) -> MatchState:
    """Fold one event into the state, in place, and return it (a new state for MatchCreated).

    Raises FoldError, naming the event, the version and phase it would follow and what is
    wrong, when the event cannot follow the state (a corrupt or foreign log). ``evolve`` checks
    that the event can be applied and leaves a whole state: the right phase, the seat to move,
    a tile that is there to play or to draw, an open end it matches, a deal of the whole set.
    Whether the event is also what the rules decide is :func:`engine.verify.verify`'s check.
    """
    if isinstance(event, MatchCreated):
        return _created(state, event)
    if state is None:
        raise FoldError(f"event 1 ({_tag(event)}): a match's log opens with match_created")
    if isinstance(event, TilePlayed):
        _played(state, event)
    elif isinstance(event, TileDrawn):
        _drawn(state, event)
    elif isinstance(event, TurnPassed):
        if state.phase != "playing" or event.seat != state.turn:
            raise _not_to_move(state, event, event.seat)
        _void(state, event.seat)  # a pass shows the seat holds none of the open numbers
        _moved(state, event.seat)
        state.defaulting = None
        state.turn = (event.seat + 1) % state.rules.players
        state.history.append(event)
    elif isinstance(event, TurnTimedOut):
        if state.phase != "playing" or event.seat != state.turn:
            raise _not_to_move(state, event, event.seat)
        state.timeouts[event.seat] += 1
        state.defaulting = event.seat  # the moves that follow are made for it
        state.history.append(event)
    elif isinstance(event, RoundStarted):
        _started(state, event)
    elif isinstance(event, RoundEnded):
        _round_ended(state, event)
    elif isinstance(event, MatchEnded):
        _match_ended(state, event)
    else:  # pragma: no cover - the union is closed
        raise FoldError(f"event {state.version + 1}: not an event of a match: {event!r}")
    state.version += 1
    return state


def _tag(event: AnyEvent) -> str:
    return str(event.__struct_config__.tag)


def _cannot_follow(s: MatchState, event: AnyEvent, why: str) -> FoldError:
    """The error for ``event`` arriving after ``s``: which event, after what, and why not."""
    return FoldError(
        f"event {s.version + 1} ({_tag(event)}) cannot follow version {s.version} "
        f"(phase {s.phase}, round {s.round}): {why}"
    )


def _created(state: MatchState | None, event: MatchCreated) -> MatchState:
    if state is not None:
        raise _cannot_follow(state, event, "only the first event of a log creates the match")
    if len(event.players) != event.rules.players:
        raise FoldError(
            f"event 1 (match_created): {len(event.players)} players named for "
            f"{event.rules.players} seats (C3)"
        )
    if event.accounts and len(event.accounts) != len(event.players):
        raise FoldError(
            f"event 1 (match_created): {len(event.accounts)} accounts named for "
            f"{len(event.players)} seats"
        )
    s = MatchState(event.rules, event.players)
    s.bots = event.bots
    s.deadline_ms = event.deadline_ms
    s.accounts = event.accounts
    s.forfeit_after = event.forfeit_after
    s.max_rounds = event.max_rounds
    s.version = 1
    return s


def _moved(s: MatchState, seat: int) -> None:
    """Count a move of ``seat``: its own ends its run of timeouts and shows its side has
    moved; a default move made for it after a timeout does neither."""
    if s.defaulting != seat:
        s.timeouts[seat] = 0
        s.moved[s.rules.side_of(seat)] = True


def _not_to_move(s: MatchState, event: AnyEvent, seat: int) -> FoldError:
    """The error for a move by ``seat`` when no round is on or another seat is to move."""
    if s.phase == "over":
        return _cannot_follow(s, event, "the match is over")
    if s.phase != "playing":
        return _cannot_follow(s, event, "no round is on")
    return _cannot_follow(s, event, f"it is seat {s.turn}'s turn, not seat {seat}'s")


def _played(s: MatchState, event: TilePlayed) -> None:
    seat, t, name = event.seat, event.tile, event.end
    if s.phase != "playing" or seat != s.turn:
        raise _not_to_move(s, event, seat)
    hand = s.hands[seat]
    if t not in hand:
        raise _cannot_follow(s, event, f"{format_tile(t)} is not in seat {seat}'s hand")
    board = s.board
    end: int | None = None  # None: the lead
    if name is None:
        if board.tiles:
            raise _cannot_follow(s, event, "only the lead is played on no end (C6)")
    else:
        end = END_INDEX[name]  # the decoder admits only the four names
        number = board.numbers[end]
        if number is None and not board.tiles:
            raise _cannot_follow(s, event, f"the lead is played on no end, not {name!r}")
        if number is None:
            raise _cannot_follow(s, event, f"the {name!r} end is not open")
        if number not in t:
            raise _cannot_follow(
                s, event, f"{format_tile(t)} does not match the {name} end's {number}"
            )
    last = s.history[-1]
    if isinstance(last, TileDrawn) and last.seat == seat:
        _void(s, seat)  # S3: it drew because it held none of the open numbers
    rules = s.rules
    straight = rules.family == "straight"
    if end is None:
        board.lead(t, straight)
    else:
        board.place(t, end, straight)
    hand.remove(t)
    _moved(s, seat)
    s.defaulting = None
    if event.points:  # S4: only Straight scores during play
        s.scores[rules.side_of(seat)] += event.points
    s.played.append(t)
    s.forced_lead = None
    s.turn = (seat + 1) % rules.players
    s.history.append(event)


def _drawn(s: MatchState, event: TileDrawn) -> None:
    if s.phase != "playing" or event.seat != s.turn:
        raise _not_to_move(s, event, event.seat)
    if s.rules.family != "straight":
        raise _cannot_follow(s, event, "there is no drawing in Express (E1)")
    if event.tile is None:
        raise _cannot_follow(s, event, "the drawn tile is hidden: a seat's view is not a log")
    if not s.stock:
        raise _cannot_follow(s, event, "the boneyard is empty (S3)")
    if event.tile != s.stock[0]:
        raise _cannot_follow(
            s,
            event,
            f"{format_tile(event.tile)} drawn, but the boneyard's next tile is "
            f"{format_tile(s.stock[0])}",
        )
    s.voids[event.seat].clear()  # the drawn tile is hidden: it may show any number
    _moved(s, event.seat)
    s.hands[event.seat].add(s.stock.pop(0))
    s.history.append(event)


def _started(s: MatchState, event: RoundStarted) -> None:
    n = s.rules.players
    if s.phase != "dealing":
        over = s.phase == "over"
        raise _cannot_follow(s, event, "the match is over" if over else "a round is still on")
    if event.round != s.round + 1:
        raise _cannot_follow(s, event, f"round {event.round} dealt after round {s.round}")
    if not 0 <= event.leader < n:
        raise _cannot_follow(s, event, f"the leader, seat {event.leader}, does not exist (C3)")
    if len(event.hands) != n:
        raise _cannot_follow(s, event, f"{len(event.hands)} hands dealt to {n} players (C5)")
    hands: list[set[Tile]] = []
    for seat, hand in enumerate(event.hands):
        if hand is None:
            raise _cannot_follow(s, event, f"seat {seat}'s hand is hidden: a view is not a log")
        if len(hand) != HAND_SIZE:
            raise _cannot_follow(
                s, event, f"seat {seat} is dealt {len(hand)} tiles, not {HAND_SIZE} (C5)"
            )
        hands.append(set(hand))
    stock = event.stock
    if stock is None:
        raise _cannot_follow(s, event, "the stock is hidden: a view is not a log")
    whole = tile_set(s.rules.top)  # as many tiles as the set, and all of them: each once
    if len(stock) + n * HAND_SIZE != len(whole) or set(stock).union(*hands) != whole:
        raise _cannot_follow(
            s, event, f"the hands and the stock are not the whole double-{s.rules.top} set (C1)"
        )
    if event.forced_lead is not None and event.forced_lead not in hands[event.leader]:
        raise _cannot_follow(
            s,
            event,
            f"the forced lead {format_tile(event.forced_lead)} is not in the leader's hand (E2)",
        )
    s.phase = "playing"
    s.round = event.round
    s.leader = s.turn = event.leader
    s.hands = hands
    s.stock = list(stock)
    s.board = Board()
    s.forced_lead = event.forced_lead
    s.seed, s.salt = event.seed, event.salt
    s.history = [event]
    s.played = []
    s.voids = [set() for _ in range(n)]


def _round_ended(s: MatchState, event: RoundEnded) -> None:
    if s.phase != "playing":
        over = s.phase == "over"
        raise _cannot_follow(s, event, "the match is over" if over else "no round is on")
    if event.round != s.round:
        raise _cannot_follow(s, event, f"it ends round {event.round}, not round {s.round}")
    if len(event.scores) != s.rules.sides:
        raise _cannot_follow(s, event, f"{len(event.scores)} scores for {s.rules.sides} sides")
    s.phase = "dealing"
    s.defaulting = None
    s.scores = list(event.scores)
    s.prev_leader = s.leader
    s.prev_winner = event.winner
    s.last_round = event
    s.history.append(event)


def _match_ended(s: MatchState, event: MatchEnded) -> None:
    if s.phase == "over":
        raise _cannot_follow(s, event, "the match is already over")
    if len(event.scores) != s.rules.sides:
        raise _cannot_follow(s, event, f"{len(event.scores)} scores for {s.rules.sides} sides")
    unplayed = event.reason in ("aborted", "cancelled")
    if event.winner is None and not unplayed:
        raise _cannot_follow(s, event, f"a match that ends by {event.reason} names its winner")
    if event.winner is not None and unplayed:
        raise _cannot_follow(s, event, f"an {event.reason} match has no winner")
    if event.winner is not None and not 0 <= event.winner < s.rules.sides:
        raise _cannot_follow(s, event, f"side {event.winner} does not exist (C3)")
    s.phase = "over"
    s.scores = list(event.scores)
    s.result = event


def _void(s: MatchState, seat: int) -> None:
    """Record that ``seat`` holds no tile showing any number now open on the line."""
    s.voids[seat].update(n for n in s.board.numbers if n is not None)


def replay(events: Iterable[AnyEvent]) -> MatchState:
    """Fold a whole match from its events."""
    state: MatchState | None = None
    for event in events:
        state = evolve(state, event)
    if state is None:
        raise FoldError("no events")
    return state
