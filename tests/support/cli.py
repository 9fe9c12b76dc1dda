"""The ``domino`` command run as a child process, as a user runs it from a shell."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping


def run_domino(
    *args: str, env: Mapping[str, str], timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """``domino ARGS`` in the environment ``env``; its exit status and output (as text)."""
    return subprocess.run(
        [sys.executable, "-m", "services.cli.main", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
