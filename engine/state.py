"""The state of a match as folded from its events; mutable for speed, copied to branch."""

from __future__ import annotations

from engine.board import Board
from events.model import AnyEvent, MatchEnded, RoundEnded
from events.vocabulary import Phase as Phase  # the schema's words: events.vocabulary
from events.vocabulary import Rules, Tile


class MatchState:
    """Everything the log says about a match; ``evolve`` updates it in place.

    Hands are sets of normalized tiles; the stock is drawn from its front (C5, S3).
    """

    __slots__ = (
        "accounts",
        "board",
        "bots",
        "deadline_ms",
        "defaulting",
        "forced_lead",
        "forfeit_after",
        "hands",
        "history",
        "last_round",
        "leader",
        "max_rounds",
        "moved",
        "phase",
        "played",
        "players",
        "prev_leader",
        "prev_winner",
        "result",
        "round",
        "rules",
        "salt",
        "scores",
        "seed",
        "stock",
        "timeouts",
        "turn",
        "version",
        "voids",
    )

    def __init__(self, rules: Rules, players: tuple[str, ...]) -> None:
        self.rules = rules
        self.players = players
        self.version = 0  # events folded so far
        self.bots: tuple[str | None, ...] = ()  # house bot pool by seat (service setting)
        self.deadline_ms = 0  # each turn's time limit (service setting)
        self.accounts: tuple[str | None, ...] = ()  # the account holding each seat, if any
        self.forfeit_after = 0  # timeouts in a row that forfeit the match (0: never)
        self.max_rounds = 0  # rounds after which the match ends (0: no cap)
        self.timeouts = [0] * rules.players  # by seat: turns timed out in a row
        self.moved = [False] * rules.sides  # by side: whether it has made a move of its own
        self.defaulting: int | None = None  # the seat whose default move is being recorded
        self.phase: Phase = "dealing"
        self.round = 0
        self.scores = [0] * rules.sides
        self.hands: list[set[Tile]] = [set() for _ in range(rules.players)]
        self.stock: list[Tile] = []
        self.board = Board()
        self.turn = 0
        self.leader = 0
        self.forced_lead: Tile | None = None
        self.seed: str | None = None  # this round's seed and salt, revealed at its end (F1)
        self.salt: str | None = None
        self.prev_leader: int | None = None
        self.prev_winner: int | None = None
        self.history: list[AnyEvent] = []  # this round's events, for replays
        self.played: list[Tile] = []  # this round's line, in the order played
        self.voids: list[set[int]] = [set() for _ in range(rules.players)]  # see events.view.View
        self.last_round: RoundEnded | None = None
        self.result: MatchEnded | None = None

    def copy(self) -> MatchState:
        """An independent copy (events are immutable and shared)."""
        s = MatchState.__new__(MatchState)
        s.rules = self.rules
        s.players = self.players
        s.version = self.version
        s.bots = self.bots
        s.deadline_ms = self.deadline_ms
        s.accounts = self.accounts
        s.forfeit_after = self.forfeit_after
        s.max_rounds = self.max_rounds
        s.timeouts = self.timeouts[:]
        s.moved = self.moved[:]
        s.defaulting = self.defaulting
        s.phase = self.phase
        s.round = self.round
        s.scores = self.scores[:]
        s.hands = [set(h) for h in self.hands]
        s.stock = self.stock[:]
        s.board = self.board.copy()
        s.turn = self.turn
        s.leader = self.leader
        s.forced_lead = self.forced_lead
        s.seed = self.seed
        s.salt = self.salt
        s.prev_leader = self.prev_leader
        s.prev_winner = self.prev_winner
        s.history = self.history[:]
        s.played = self.played[:]
        s.voids = [set(v) for v in self.voids]
        s.last_round = self.last_round
        s.result = self.result
        return s

    def side_of(self, seat: int) -> int:
        """The side a seat scores for."""
        return self.rules.side_of(seat)
