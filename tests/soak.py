"""The soak: matches at a steady rate for a while, the retention period set short, and a verdict
on whether Redis's memory and every process's RSS stay flat.

    python -m tests.soak --minutes 10 [--rate 2] [--retention 60] [--cluster]

It starts a private Redis (or a local Redis Cluster), the referee, two pools of house bots,
the projector (with its archiver) and the gateway as processes, with matches archived
``--retention`` seconds after they end into a temporary directory. It then creates ``--rate``
matches a second through the gateway's lobby (house bots on every seat, two seats, to 50
points), follows every tenth one's spectator stream to its end, and prints one JSON line every
``--every`` seconds: matches created, finished and archived so far, the results kept in
Redis (the ratings' per-match records, until archived and compacted), Redis's ``used_memory``
and key count, and each process's RSS.

The verdict (the last line) looks at the samples taken once the retention period has passed
twice (by then matches are archived as fast as they finish): the mean of the last quarter of
those samples against the mean of their first quarter. A figure is flat when the last is at
most ``--tolerance`` (10%) above the first, or within an absolute margin (4 MB for Redis, 8 MB
for a process) that allows for allocator noise; the least-squares slope over the same samples
is printed with it, per hour. The results kept must stay flat too, and at most what the
matches of the retention period, the compaction's margin and interval and a minute more can
leave (``results_bound``): a finished match's result leaves Redis once it is archived and
compacted. The one exit code: 0 when everything is flat and bounded, 1 when not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from services.cli.supervisor import Stack
from services.config import Settings
from services.projections.ratings import NAME as RATINGS
from services.redis.connection import Client, open_client
from services.redis.servers import local_cluster
from services.store.projection import RedisCheckpoints
from tests.support.redis_env import redis_server

REDIS_MARGIN = 4 * 2**20
PROCESS_MARGIN = 8 * 2**20


@dataclass
class Sample:
    """One line of the soak's output."""

    t: float
    created: int
    finished: int
    archived: int
    redis_bytes: int
    redis_keys: int
    rss: dict[str, int]
    results_kept: int = 0

    def line(self) -> dict[str, Any]:
        """The sample as the JSON line printed."""
        return {
            "t": round(self.t, 1),
            "created": self.created,
            "finished": self.finished,
            "archived": self.archived,
            "results_kept": self.results_kept,
            "redis_used_memory": self.redis_bytes,
            "redis_keys": self.redis_keys,
            "rss": self.rss,
        }


@dataclass
class Verdict:
    """Whether each figure stayed flat over the steady part of the soak."""

    figures: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def flat(self) -> bool:
        """Every figure flat."""
        return all(f["flat"] for f in self.figures.values())

    def line(self) -> dict[str, Any]:
        """The verdict as the last JSON line."""
        return {"verdict": "flat" if self.flat else "growing", "figures": self.figures}


def verdict(
    samples: list[Sample],
    steady_from: float,
    tolerance: float = 0.10,
    results_bound: int | None = None,
) -> Verdict:
    """Compare the last quarter of the samples taken from ``steady_from`` on with their first
    quarter (see the module); with ``results_bound``, the results kept must stay under it."""
    steady = [s for s in samples if s.t >= steady_from]
    out = Verdict()
    if len(steady) < 8:
        out.figures["samples"] = {"steady": len(steady), "flat": False}
        return out
    quarter = max(2, len(steady) // 4)
    series: dict[str, tuple[list[float], float]] = {
        "redis_used_memory": ([s.redis_bytes for s in steady], REDIS_MARGIN),
        "redis_keys": ([s.redis_keys for s in steady], 200),
        "results_kept": ([s.results_kept for s in steady], 50),
    }
    for name in steady[0].rss:
        series[f"rss:{name}"] = ([s.rss.get(name, 0) for s in steady], PROCESS_MARGIN)
    times = [s.t for s in steady]
    for name, (values, margin) in series.items():
        first = statistics.fmean(values[:quarter])
        last = statistics.fmean(values[-quarter:])
        slope = _slope(times, values) * 3600
        flat = last <= first * (1 + tolerance) or last - first <= margin
        out.figures[name] = {
            "first": round(first),
            "last": round(last),
            "change": round(last - first),
            "slope_per_hour": round(slope),
            "flat": flat,
        }
    if results_bound is not None:
        most = max(s.results_kept for s in steady)
        out.figures["results_kept_bound"] = {
            "most": most,
            "bound": results_bound,
            "flat": most <= results_bound,
        }
    return out


def _slope(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if not den else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def rss_bytes(pid: int) -> int:
    """A process's resident set size."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def redis_figures(redis: Client, cluster: bool) -> tuple[int, int]:
    """Redis's used memory and key count (summed over a cluster's masters)."""
    if not cluster:
        memory = int((await redis.info("memory"))["used_memory"])
        return memory, int(await redis.dbsize())
    memory = keys = 0
    for node in redis.get_primaries():  # type: ignore[union-attr]
        info = await redis.info("memory", target_nodes=node)  # type: ignore[call-arg]
        memory += int(info["used_memory"])
        keys += int(await redis.execute_command("DBSIZE", target_nodes=node))
    return memory, keys


@contextlib.contextmanager
def _redis(cluster: bool, url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
    elif cluster:
        with local_cluster(3) as c:
            yield c.urls[0]
    else:
        with redis_server(appendfsync="no", env_var=None) as url:
            yield url


def soak_settings(url: str, archive: str, retention: float, cluster: bool) -> Settings:
    """The services' settings for a soak: retention short, everything trimmed often."""
    return Settings(
        redis_url=url,
        cluster=cluster,
        prefix=f"soak{uuid.uuid4().hex[:6]}",
        partitions=4,
        log_level="warning",
        archive=archive,
        archive_after_s=retention,
        dedupe_keep_s=min(30.0, retention / 2),
        log_keep_s=min(10.0, retention / 4),
        trim_every_s=1.0,
        compact_every_s=COMPACT_EVERY_S,
        compact_margin_s=COMPACT_MARGIN_S,
    )


COMPACT_EVERY_S = 5.0
COMPACT_MARGIN_S = 5.0


def results_bound(rate: float, retention: float) -> int:
    """The most results a soak may keep in Redis: the matches that end during the retention
    period, the compaction's margin and interval, and a minute more (a match's play, a round's
    lag), at ``rate`` a second."""
    return round(rate * (retention + COMPACT_MARGIN_S + COMPACT_EVERY_S + 60))


GATEWAY_ENV = {
    "DOMINO_GATEWAY_LOBBY_PER_S": "1000",
    "DOMINO_GATEWAY_LOBBY_BURST": "1000",
    "DOMINO_GATEWAY_STREAMS_PER_CLIENT": "1000",
    "DOMINO_GATEWAY_HOUSE_MATCHES_PER_CLIENT": "100000",  # every match is the soak's address
}


def run(
    seconds: float,
    rate: float,
    retention: float,
    every: float = 10.0,
    cluster: bool = False,
    out: Any = sys.stdout,
    url: str | None = None,
) -> tuple[list[Sample], Verdict]:
    """Soak for ``seconds`` (on the Redis at ``url``, else one of its own); print the samples
    and the verdict; return them."""
    import os

    from tests.gateway.conftest import free_port, wait_healthy

    with _redis(cluster, url) as url, tempfile.TemporaryDirectory(prefix="domino-soak-") as tmp:
        settings = soak_settings(url, str(Path(tmp) / "archive"), retention, cluster)
        port = free_port()
        saved = {k: os.environ.get(k) for k in GATEWAY_ENV}
        os.environ.update(GATEWAY_ENV)
        try:
            with Stack(url, settings, pools={"random": 1, "greedy": 1}, log_dir=tmp) as stack:
                stack.spawn("gateway", "gateway", "--host", "127.0.0.1", "--port", str(port))
                base = f"http://127.0.0.1:{port}"
                wait_healthy(base, stack.processes["gateway"], timeout=120)
                pids = {name: p.pid for name, p in stack.processes.items()}
                samples = asyncio.run(
                    _drive(base, settings, pids, seconds, rate, every, out, Path(tmp))
                )
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    result = verdict(
        samples,
        steady_from=min(2 * retention + 20, seconds / 2),
        results_bound=results_bound(rate, retention),
    )
    print(json.dumps(result.line()), file=out, flush=True)
    return samples, result


async def _drive(
    base: str,
    settings: Settings,
    pids: dict[str, int],
    seconds: float,
    rate: float,
    every: float,
    out: Any,
    tmp: Path,
) -> list[Sample]:
    redis = open_client(settings.redis_url or "", cluster=settings.cluster)
    created: list[str] = []
    watching: set[asyncio.Task[None]] = set()
    samples: list[Sample] = []
    archive_dir = tmp / "archive"
    start = time.monotonic()
    next_sample = start
    async with httpx.AsyncClient(base_url=f"{base}/api/v1", timeout=30) as http:

        async def watch(match_id: str) -> None:
            with contextlib.suppress(httpx.HTTPError):
                async with http.stream("GET", f"/matches/{match_id}/stream?after=0") as r:
                    async for _ in r.aiter_lines():
                        pass

        try:
            while (now := time.monotonic()) - start < seconds:
                due = int((now - start) * rate) + 1
                while len(created) < due:
                    r = await http.post(
                        "/matches",
                        json={"seats": ["greedy", "random"], "rules": {"players": 2, "target": 50}},
                    )
                    if r.status_code != 201:
                        print(json.dumps({"error": r.status_code, "body": r.text[:200]}), file=out)
                        break
                    match_id = r.json()["match"]["match_id"]
                    created.append(match_id)
                    if len(created) % 10 == 0:
                        task = asyncio.create_task(watch(match_id))
                        watching.add(task)
                        task.add_done_callback(watching.discard)
                if now >= next_sample:
                    next_sample += every
                    memory, nkeys = await redis_figures(redis, settings.cluster)
                    archived = sum(1 for _ in archive_dir.rglob("*.jsonl.gz"))
                    sample = Sample(
                        t=now - start,
                        created=len(created),
                        finished=await _finished(redis, settings) + archived,
                        archived=archived,
                        redis_bytes=memory,
                        redis_keys=nkeys,
                        rss={name: rss_bytes(pid) for name, pid in pids.items()},
                        results_kept=await _results_kept(redis, settings),
                    )
                    samples.append(sample)
                    print(json.dumps(sample.line()), file=out, flush=True)
                await asyncio.sleep(0.05)
        finally:
            for task in list(watching):
                task.cancel()
            await redis.aclose()
    return samples


async def _finished(redis: Client, settings: Settings) -> int:
    """The matches finished and still in Redis (the summaries' finished lists)."""
    checkpoints = RedisCheckpoints(redis, partitions=settings.partitions, prefix=settings.prefix)
    total = 0
    for p in range(settings.partitions):
        total += int(await redis.zcard(checkpoints.key("summary", p, "finished")))
    return total


async def _results_kept(redis: Client, settings: Settings) -> int:
    """The finished matches' results the ratings projection keeps in Redis."""
    checkpoints = RedisCheckpoints(redis, partitions=settings.partitions, prefix=settings.prefix)
    total = 0
    for p in range(settings.partitions):
        total += int(await redis.hlen(checkpoints.key(RATINGS, p, "results")))
    return total


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.soak``: soak, print, and exit 0 only when everything stayed flat."""
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=2.0, help="matches created a second")
    parser.add_argument("--retention", type=float, default=60.0, help="DOMINO_ARCHIVE_AFTER_S")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--cluster", action="store_true", help="on a local 3-master cluster")
    args = parser.parse_args(argv)
    _, result = run(args.minutes * 60, args.rate, args.retention, args.every, args.cluster)
    return 0 if result.flat else 1


if __name__ == "__main__":
    sys.exit(main())
