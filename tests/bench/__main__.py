"""Run benchmark groups and print each result as one JSON object per line.

    python -m tests.bench all            every group that exists
    python -m tests.bench store engine   the named groups, in that order

A group is a module `tests/bench/<group>.py` whose `run()` yields dicts; a group not written yet is
skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from services.logs import configure

GROUPS = ("engine", "store", "service", "gateway", "scale")


def main(argv: list[str]) -> int:
    """Run the groups named in `argv` (default `all`); return the process exit code."""
    names = argv or ["all"]
    unknown = [name for name in names if name != "all" and name not in GROUPS]
    if unknown:
        print(
            f"unknown benchmark group {', '.join(unknown)}; choose from all, {', '.join(GROUPS)}",
            file=sys.stderr,
        )
        return 2
    configure("info")  # logs go to stderr; stdout carries only the JSON lines
    selected = GROUPS if "all" in names else tuple(dict.fromkeys(names))
    for group in selected:
        run = _runner(group)
        if run is None:
            if "all" not in names:
                print(f"benchmark group {group} has no module yet", file=sys.stderr)
            continue
        for result in run():
            print(json.dumps(result), flush=True)
    return 0


def _runner(group: str) -> Callable[[], Iterator[dict[str, Any]]] | None:
    name = f"{__package__ or 'tests.bench'}.{group}"
    if importlib.util.find_spec(name) is None:
        return None
    run: Callable[[], Iterator[dict[str, Any]]] = importlib.import_module(name).run
    return run


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the reader (e.g. `head`) has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
