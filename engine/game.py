"""The rules as two pure functions: ``decide`` (command → events or a rejection) and ``evolve``.

Nothing here reads a clock, draws a random number or does I/O: the shuffled deal and the first
leader's draw arrive in a ``DealRound`` command and are recorded in ``RoundStarted``, so a match
replays exactly from its events alone. Rule numbers refer to RULES.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from engine.board import END_INDEX, Board
from engine.rules import HAND_SIZE
from engine.state import MatchState
from engine.tiles import format_tile, full_set, is_double, pips, tile, weight
from events.model import (
    AnyCommand,
    AnyEvent,
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
from events.vocabulary import END_NAMES, RulesError, Tile

MAX_NAME = 64
MAX_DEADLINE_MS = 86_400_000
_POOL = re.compile(r"[a-z0-9_\-]{1,32}")


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
    if isinstance(command, DealRound):
        return _deal(state, command)
    seat = command.seat
    if not 0 <= seat < state.rules.players:
        return _reject("no_such_seat", "C3", f"seat {seat} does not exist")
    if isinstance(command, Resign):
        return _resign(state, seat)
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
    for event in result:
        state = evolve(state, event)
    assert state is not None
    return state, result


def _create(state: MatchState | None, command: CreateMatch) -> list[AnyEvent] | Rejection:
    if state is not None:
        return _reject("match_exists", "-", "the match already exists")
    try:
        command.rules.validate()
    except RulesError as e:
        return _reject("bad_rules", "C1", str(e))
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
    if any(b is not None and not _POOL.fullmatch(b) for b in command.bots):
        return _reject("bad_players", "C3", "bot pool names are 1-32 of a-z, 0-9, _ and -")
    if not 0 <= command.deadline_ms <= MAX_DEADLINE_MS:
        return _reject("bad_rules", "-", f"deadline_ms must be 0 to {MAX_DEADLINE_MS}")
    return [
        MatchCreated(
            rules=command.rules,
            players=players,
            bots=command.bots,
            deadline_ms=command.deadline_ms,
        )
    ]


def _deal(state: MatchState, command: DealRound) -> list[AnyEvent] | Rejection:
    rules = state.rules
    if state.phase != "dealing":
        return _reject("bad_deal", "C5", "a round is already being played")
    order = command.order
    if sorted(order) != list(full_set(rules.top)) or any(a > b for a, b in order):
        return _reject("bad_deal", "C1", f"the deal must be the whole double-{rules.top} set")
    n = rules.players
    hands = tuple(tuple(sorted(order[k * HAND_SIZE : (k + 1) * HAND_SIZE])) for k in range(n))
    stock = tuple(order[n * HAND_SIZE :])
    forced: Tile | None = None
    if state.round == 0 and rules.family == "express":
        leader, forced = _first_express_lead(hands)  # E2
    elif state.round == 0:
        if command.first_leader is None or not 0 <= command.first_leader < n:
            return _reject("bad_deal", "S1", "the first leader's draw must name a seat")
        leader = command.first_leader  # S1: drawn at random by the referee
    elif rules.family == "express" and rules.next_leader == "after_winner":
        assert state.prev_winner is not None
        leader = (state.prev_winner + 1) % n  # E3
    else:
        assert state.prev_leader is not None
        leader = (state.prev_leader + 1) % n  # E3 rotate, S1
    return [
        RoundStarted(
            round=state.round + 1,
            leader=leader,
            hands=hands,
            stock=stock,
            hand_sizes=tuple(len(h) for h in hands),
            stock_size=len(stock),
            forced_lead=forced,
        )
    ]


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


def round5(points: int) -> int:
    """Round to the nearest multiple of 5: remainders 1-2 down, 3-4 up (S5)."""
    r = points % 5
    return points - r if r <= 2 else points + 5 - r


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
    )


def _resign(state: MatchState, seat: int) -> list[AnyEvent]:
    """The resigning side loses; the best other side wins (ties by C7 order)."""
    rules = state.rules
    loser = rules.side_of(seat)
    order = [rules.side_of(s) for s in _nearness(state)]
    winner = max((s for s in order if s != loser), key=lambda s: state.scores[s])
    events: list[AnyEvent] = []
    if state.phase == "playing":
        hands = [set(h) for h in state.hands]
        events.append(
            _round_end(state, hands, state.stock, state.scores[:], "resigned", None, None, 0)
        )
    events.append(
        MatchEnded(winner=winner, scores=tuple(state.scores), reason="resigned", resigned=seat)
    )
    return events


def _timeout(state: MatchState, command: TimeOutTurn) -> list[AnyEvent] | Rejection:
    """The seat's default turn: draw until playable, then play the heaviest tile; else pass."""
    if command.version != state.version:
        return _reject("stale_timeout", "-", "the turn this deadline was set for has passed")
    events: list[AnyEvent] = [TurnTimedOut(seat=command.seat)]
    s = state.copy()
    evolve(s, events[0])
    while s.phase == "playing" and s.turn == command.seat:
        move = default_move(s)
        result = decide(s, move)
        assert not isinstance(result, Rejection), result
        events.extend(result)
        for event in result:
            evolve(s, event)
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

    Raises FoldError if the event cannot follow the state.
    """
    if isinstance(event, MatchCreated):
        if state is not None:
            raise FoldError("match_created can only be the first event")
        s = MatchState(event.rules, event.players)
        s.bots = event.bots
        s.deadline_ms = event.deadline_ms
        s.version = 1
        return s
    if state is None:
        raise FoldError(f"{event.__struct_config__.tag} before match_created")
    try:
        _fold(state, event)
    except (KeyError, IndexError, AssertionError, TypeError) as e:
        raise FoldError(
            f"event {state.version + 1} ({event.__struct_config__.tag}) cannot follow: {e!r}"
        ) from None
    state.version += 1
    return state


def _fold(s: MatchState, event: AnyEvent) -> None:
    n = s.rules.players
    if isinstance(event, TilePlayed):
        assert s.phase == "playing"
        t = event.tile
        last = s.history[-1]
        if isinstance(last, TileDrawn) and last.seat == event.seat:
            _void(s, event.seat)  # S3: it drew because it held none of the open numbers
        s.hands[event.seat].remove(t)
        straight = s.rules.family == "straight"
        if event.end is None:
            s.board.lead(t, straight)
        else:
            s.board.place(t, END_INDEX[event.end], straight)
        s.scores[s.rules.side_of(event.seat)] += event.points
        s.played.append(t)
        s.forced_lead = None
        s.turn = (event.seat + 1) % n
        s.history.append(event)
    elif isinstance(event, TileDrawn):
        assert event.tile is not None and s.stock[0] == event.tile
        s.voids[event.seat].clear()  # the drawn tile is hidden: it may show any number
        s.hands[event.seat].add(s.stock.pop(0))
        s.history.append(event)
    elif isinstance(event, TurnPassed):
        _void(s, event.seat)  # a pass shows the seat holds none of the open numbers
        s.turn = (event.seat + 1) % n
        s.history.append(event)
    elif isinstance(event, TurnTimedOut):
        s.history.append(event)
    elif isinstance(event, RoundStarted):
        assert s.phase == "dealing"
        s.phase = "playing"
        s.round = event.round
        s.leader = s.turn = event.leader
        s.hands = [set(h) for h in event.hands if h is not None]
        assert len(s.hands) == n and event.stock is not None
        s.stock = list(event.stock)
        s.board = Board()
        s.forced_lead = event.forced_lead
        s.history = [event]
        s.played = []
        s.voids = [set() for _ in range(n)]
    elif isinstance(event, RoundEnded):
        s.phase = "dealing"
        s.scores = list(event.scores)
        s.prev_leader = s.leader
        s.prev_winner = event.winner
        s.last_round = event
        s.history.append(event)
    elif isinstance(event, MatchEnded):
        s.phase = "over"
        s.scores = list(event.scores)
        s.result = event
    else:  # pragma: no cover - the union is closed
        raise FoldError(f"unknown event {event!r}")


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
