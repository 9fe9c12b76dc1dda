"""The schema is the lower layer: ``events/`` imports nothing from ``engine/``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.board import END_NAMES, End
from engine.rules import Rules, RulesError
from engine.state import Phase
from engine.tiles import SET_SIZES, Tile
from engine.views import OpenEnd, View
from events import view, vocabulary

pytestmark = pytest.mark.engine

SCHEMA_MODULES = (
    "events.codec",
    "events.envelope",
    "events.model",
    "events.view",
    "events.vocabulary",
    "events.wire",
)


def test_importing_every_schema_module_loads_no_engine_module() -> None:
    probe = (
        f"import sys\nfor m in {SCHEMA_MODULES!r}: __import__(m)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'engine')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == ""


def test_the_engine_re_exports_the_schema_vocabulary_under_its_old_names() -> None:
    assert (Tile, SET_SIZES) == (vocabulary.Tile, vocabulary.SET_SIZES)
    assert (End, END_NAMES) == (vocabulary.End, vocabulary.END_NAMES)
    assert (Rules, RulesError) == (vocabulary.Rules, vocabulary.RulesError)
    assert Phase == vocabulary.Phase
    assert (View, OpenEnd) == (view.View, view.OpenEnd)
