"""Every rejection reason is documented once, with the rules a rejection for it names: the
meanings in ``events.model.REASONS``, the rules checked against every place the engine and
the services make a rejection, and the table in docs/protocol.md made from them."""

from __future__ import annotations

import ast
import typing
from collections import defaultdict
from pathlib import Path

import pytest

from events.model import REASONS, Reason
from services.cli.reasons import END, START, reasons_markdown

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
MAKERS = ["engine/game.py", "services/core/decision.py", "services/referee/service.py"]
"""Where rejections are made: ``_reject(reason, rule, ...)`` and ``Rejection(reason=, rule=)``."""


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def rules_given() -> dict[str, set[str]]:
    """Each reason, and the literal rules the code gives it (``"-"`` included)."""
    given: dict[str, set[str]] = defaultdict(set)
    for path in MAKERS:
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            if node.func.id == "_reject" and len(node.args) >= 2:
                reason, rule = _literal(node.args[0]), _literal(node.args[1])
            elif node.func.id == "Rejection":
                named = {k.arg: k.value for k in node.keywords}
                reason, rule = _literal(named.get("reason")), _literal(named.get("rule"))
            else:
                continue
            if reason is not None and rule is not None:
                given[reason].add(rule)
    for node in ast.walk(ast.parse((ROOT / "events/vocabulary.py").read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RulesError":
            rule = _literal(node.args[1]) if len(node.args) > 1 else "-"
            given["bad_rules"].add(rule or "-")  # a rule chosen at run time is found below
            for arg in node.args[1:]:
                if isinstance(arg, ast.IfExp):
                    given["bad_rules"] |= {_literal(arg.body) or "-", _literal(arg.orelse) or "-"}
    return given


def test_every_reason_has_a_meaning_and_no_meaning_lacks_its_reason() -> None:
    assert list(REASONS) == list(typing.get_args(Reason))


def test_the_rules_each_reason_names_are_those_the_code_gives_it() -> None:
    """C4 for not_your_turn, S3 for must_play ...: no rule given in code is missing from the
    documented ones, and none documented is given nowhere."""
    given = rules_given()
    for reason, (rules, _) in REASONS.items():
        assert reason in given, f"no rejection with reason {reason!r} is made anywhere"
        assert given[reason] - {"-"} == set(rules), reason


def test_the_table_in_the_protocol_is_the_one_the_reasons_make() -> None:
    text = (ROOT / "docs/protocol.md").read_text()
    shown = text[text.index(START) : text.index(END) + len(END)]
    assert shown == reasons_markdown(), "run python -m services.cli.reasons and paste its table"
