"""Names chosen by players reach terminals (replay, results, ratings): they are shown as
typed, never read as rich markup nor as control sequences. Found by a hostile client."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from rich.console import Console

from engine.game import evolve
from engine.rules import Rules
from events.model import MatchCreated
from services.cli.render import describe, shown
from services.cli.tournament_commands import print_ratings
from services.projections.ratings import Rating

pytestmark = pytest.mark.service

HOSTILE = ["[/]", "[bold red]x", "a\x1b[31mred", "bell\x07", "\u202eevil", "line\nbreak"]


def test_a_name_is_printable_text_whatever_it_holds() -> None:
    for name in HOSTILE:
        text = shown(name)
        assert text.isprintable()
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert shown("greedy") == "greedy"
    assert shown("a\x1bb") == "a\\x1bb"


def test_the_ratings_table_prints_markup_and_escapes_as_typed() -> None:
    """`[/]` used to crash `domino ratings` (rich read it as a closing tag)."""
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    rows = [
        Rating(family="express", name=n, mu=25.0, sigma=8.0, ordinal=1.0, rated=1, won=0)
        for n in HOSTILE
    ]
    print_ratings(console, rows)
    printed = out.getvalue()
    assert "[/]" in printed and "[bold red]x" in printed
    assert "\x1b" not in printed and "\x07" not in printed and "\u202e" not in printed


def test_a_replay_names_the_seats_without_their_control_characters() -> None:
    created = MatchCreated(rules=Rules.make("straight", players=2), players=("a\x1b[2Jwipe", "[/]"))
    lines = describe(evolve(None, created), created)
    assert all(line.isprintable() for line in lines)
    assert "[/]" in lines[0] and "a\\x1b[2Jwipe" in lines[0]


def test_a_command_whose_reader_stops_early_exits_quietly() -> None:
    """``domino play | head -1``: the rest of the match has nowhere to go, and that is no
    error (it was a BrokenPipeError traceback)."""
    run = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m services.cli.main play | head -1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert run.stdout.startswith("Express"), run.stdout
