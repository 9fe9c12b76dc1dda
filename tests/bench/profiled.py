"""Run a ``domino`` subcommand under a profiler and write where its time went when it exits.

    python -m tests.bench.profiled OUT MODE -- gateway --host 127.0.0.1 --port 8080

MODE ``sample``: the main thread's stack is sampled every SAMPLE_S seconds of CPU time (cheap
enough to leave the figures near what they are unprofiled); OUT gets the functions most often
on the CPU (self) and on the stack (total), then the commonest stacks. MODE ``cprofile``: exact call
counts and times from cProfile, sorted by own time (slower: every call is counted).

The gateway bench (tests/bench/gateway.py) starts the gateway through this when
DOMINO_BENCH_PROFILE is set, and profiles the cheap players' measured window.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import signal
import sys
from collections import Counter
from types import CodeType, FrameType

from services.cli.main import main

SAMPLE_S = 0.001
"""CPU time between samples (ITIMER_PROF counts the process's CPU time, not the clock's)."""


class Sampler:
    """Samples the main thread's stack every SAMPLE_S of CPU time (SIGPROF, whose handler
    Python runs in the main thread with the frame it interrupted), so samples fall in
    proportion to where the CPU goes."""

    def __init__(self) -> None:
        self.stacks: Counter[tuple[CodeType, ...]] = Counter()

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, SAMPLE_S, SAMPLE_S)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        codes: list[CodeType] = []
        while frame is not None:
            codes.append(frame.f_code)
            frame = frame.f_back
        codes.reverse()
        self.stacks[tuple(codes)] += 1

    def report(self, top: int = 50) -> str:
        """The functions most often running (self) and on the stack (total), then the
        commonest stacks, innermost last."""
        total = sum(self.stacks.values()) or 1
        own: Counter[str] = Counter()
        anywhere: Counter[str] = Counter()
        stacks: Counter[tuple[str, ...]] = Counter()
        for codes, n in self.stacks.items():
            names = tuple(_name(c) for c in codes)
            stacks[names[-12:]] += n
            if names:
                own[names[-1]] += n
            for name in set(names):
                anywhere[name] += n
        out = io.StringIO()
        out.write(f"samples {total} ({SAMPLE_S * 1000:g} ms of CPU each)\n\n-- self --\n")
        for name, n in own.most_common(top):
            out.write(f"{100 * n / total:6.2f}%  {name}\n")
        out.write("\n-- total --\n")
        for name, n in anywhere.most_common(top * 2):
            out.write(f"{100 * n / total:6.2f}%  {name}\n")
        out.write("\n-- stacks --\n")
        for names, n in stacks.most_common(top):
            out.write(f"{100 * n / total:6.2f}%  {' > '.join(names)}\n")
        return out.getvalue()


def _name(code: CodeType) -> str:
    return f"{code.co_qualname} ({code.co_filename.rsplit('/', 2)[-1]}:{code.co_firstlineno})"


def run(out: str, mode: str, args: list[str]) -> int:
    """Run ``domino ARGS`` under the profiler ``mode``, profiling from SIGUSR1 to SIGUSR2;
    write the report to ``out`` at the end. uvicorn raises the SIGTERM it stopped on again
    once it has stopped: it is ignored here, so the report is written."""
    signal.signal(signal.SIGTERM, lambda *_: None)
    if mode == "cprofile":
        profile = cProfile.Profile()
        signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
        signal.signal(signal.SIGUSR2, lambda *_: profile.disable())
        try:
            return main(args)
        finally:
            profile.disable()
            text = io.StringIO()
            stats = pstats.Stats(profile, stream=text)
            stats.sort_stats("tottime").print_stats(50)
            stats.sort_stats("cumulative").print_stats(80)
            with open(out, "w") as f:
                f.write(text.getvalue())
    sampler = Sampler()
    signal.signal(signal.SIGUSR1, lambda *_: sampler.start())
    signal.signal(signal.SIGUSR2, lambda *_: sampler.stop())
    try:
        return main(args)
    finally:
        sampler.stop()
        with open(out, "w") as f:
            f.write(sampler.report())


if __name__ == "__main__":
    out, mode, sep, *rest = sys.argv[1:]
    if sep != "--":
        raise SystemExit(__doc__)
    sys.exit(run(out, mode, rest))
