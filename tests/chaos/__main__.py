"""``python -m tests.chaos`` (``make chaos``): the long chaos run, one JSON line per check.

    python -m tests.chaos --seconds 180 --seed 7 --house 200 --outside 30 --workdir .chaos

Exits 1 when a check fails. The defaults of every option come from DOMINO_CHAOS_* variables
(tests/chaos/harness.py, ``Config``); ``--workdir`` keeps Redis's files and every process's log.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tests.chaos.harness import FAULTS, Config, run, workdir


def main(argv: list[str] | None = None) -> int:
    """Run once and print the checks; 0 when every one holds."""
    base = Config.from_env()
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--seconds", type=float, default=base.chaos_s, help="of faults")
    parser.add_argument("--seed", type=int, default=base.seed)
    parser.add_argument("--house", type=int, default=base.house, help="house bot matches")
    parser.add_argument("--outside", type=int, default=base.outside, help="matches over HTTP")
    parser.add_argument("--watched", type=int, default=base.watched, help="spectated matches")
    parser.add_argument("--finish", type=float, default=base.finish_s, help="s to end them all")
    parser.add_argument("--verify-commands", type=int, default=base.verify_commands)
    parser.add_argument("--faults", default=",".join(base.faults), help=",".join(FAULTS))
    parser.add_argument("--workdir", type=Path, default=None, help="kept; default: a temp dir")
    args = parser.parse_args(argv)
    config = Config(
        seed=args.seed,
        chaos_s=args.seconds,
        house=args.house,
        outside=args.outside,
        watched=args.watched,
        finish_s=args.finish,
        verify_commands=args.verify_commands,
        faults=tuple(f for f in args.faults.split(",") if f),
        workdir=args.workdir,
    )
    began = time.monotonic()
    with workdir(config) as directory:
        checks = run(config, directory)
    for check in checks:
        print(check.line(), flush=True)
    ok = all(c.ok for c in checks)
    print(f'{{"check": "all", "ok": {str(ok).lower()}, "seconds": {time.monotonic() - began:.1f}}}')
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
