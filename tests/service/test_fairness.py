"""Fair deals through the hosted service (F1, docs/fairness.md): the referee's every deal
checks out with `domino verify ID --fairness`, whole and as a seat saw it, and a copy whose
reveal was tampered with fails, naming the round."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.rules import Rules
from services.cli.supervisor import Stack
from services.config import Settings
from tests.service.conftest import wait_until_over
from tests.service.test_hosted_matches import create
from tests.support.cli import run_domino

pytestmark = [pytest.mark.service]

MATCHES: list[tuple[Rules, list[str | None]]] = [
    (Rules.make("straight", players=2, target=150), ["greedy", "random"]),
    (Rules.make("express", players=4, target=60), ["random", "greedy", "random", "greedy"]),
    (Rules.make("straight", players=3, top=9, target=100), ["random", "greedy", "random"]),
]


def domino(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return run_domino(*args, env=Stack(settings.redis_url or "", settings).env())


def test_every_hosted_deal_checks_out_and_a_tampered_reveal_is_caught(
    stack: Stack, redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    """F1: `domino verify ID --fairness` passes every round of real matches, whole and from a
    seat's redacted log (C8); an imported copy with one revealed salt changed exits 1 and
    names that round."""
    ids = create(redis_url, settings, MATCHES)
    logs = wait_until_over(redis_url, settings, ids)
    for match_id in ids:
        done = domino(settings, "verify", match_id, "--fairness")
        assert done.returncode == 0, done.stderr
        rounds = sum(1 for e in logs[match_id] if e.event.__struct_config__.tag == "round_ended")
        assert done.stdout.count(": deal matches commitment ") == rounds
        assert "round 1: deal matches commitment " in done.stdout

    match_id = ids[0]
    seen = domino(settings, "replay", match_id, "--json", "--seat", "0")
    assert seen.returncode == 0, seen.stderr
    as_seen = tmp_path / "seat0.jsonl"
    as_seen.write_text("\n".join(seen.stdout.splitlines()[:-1]) + "\n")  # the last is a view
    public = domino(settings, "verify", "--file", str(as_seen), "--fairness")
    assert public.returncode == 0, public.stderr
    assert "as a spectator sees it" in public.stdout

    exported = tmp_path / "whole.jsonl"
    assert domino(settings, "export", match_id, "-o", str(exported)).returncode == 0
    copy_id = match_id + "x"
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    ends = [r["event"] for r in rows if r["event"]["type"] == "round_ended"]
    last = ends[-1]
    last["salt"] = ("1" if last["salt"][0] != "1" else "2") + last["salt"][1:]
    for row in rows:
        row["match_id"] = copy_id
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    imported = domino(settings, "import", str(tampered))
    assert imported.returncode == 0, imported.stderr

    failed = domino(settings, "verify", copy_id, "--fairness")
    assert failed.returncode == 1
    assert f"round {last['round']}: unfair:" in failed.stderr
    assert "commitment" in failed.stderr
