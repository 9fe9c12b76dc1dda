"""The short form of the chaos run (tests/chaos/harness.py): seconds of faults under a few dozen
matches, every check holding afterwards. ``make chaos`` runs the long form."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import Config, run

pytestmark = pytest.mark.chaos


def test_under_sigkills_of_every_process_and_of_redis_and_its_pauses_nothing_is_lost(
    tmp_path: Path,
) -> None:
    """Referees, bot workers, the projector and the gateway SIGKILLed and started again, Redis
    SIGKILLed (back from its append-only file, ``appendfsync always``) and SIGSTOPped, while
    house bots and outside players play: every match finishes, every log verifies and its
    deals check out (F1), nothing is pending or dead-lettered, the projections equal a
    rebuild, and no move the gateway accepted nor event any stream showed is lost (C8: each as
    its seat may see it). DOMINO_CHAOS_SEED and the other DOMINO_CHAOS_* variables change the
    run; its logs are in the test's tmp_path."""
    checks = run(Config.from_env(), tmp_path)
    for check in checks:
        print(check.line())
    failed = [check.line() for check in checks if not check.ok]
    assert not failed, f"logs in {tmp_path / 'logs'}:\n" + "\n".join(failed)
