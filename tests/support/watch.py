"""Spectators of hosted matches, and the check that what they were shown is in the logs.

What the gateway shows anyone is what the service acknowledged: every event a spectator saw
must be in the match's log at the version it was shown with, exactly as shown.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from engine.verify import verify
from engine.views import redact
from events.envelope import Envelope
from events.model import AnyEvent
from services.gateway.protocol import EventLine


@dataclass
class Watched:
    """What the spectators of one match were shown: event id -> the event's JSON."""

    match_id: str
    seen: dict[int, Any] = field(default_factory=dict)
    over: bool = False


async def spectate(
    http: httpx.AsyncClient, gateway: str, watched: Watched, stop: asyncio.Event
) -> None:
    """Follow one match's public stream to its end, resuming after any drop."""
    url = f"{gateway}/api/v1/matches/{watched.match_id}/stream"
    while not watched.over and not stop.is_set():
        after = max(watched.seen, default=0)
        try:
            async with http.stream("GET", url, params={"after": after}) as response:
                if response.status_code != 200:
                    await asyncio.sleep(0.2)
                    continue
                async for line in response.aiter_lines():
                    if stop.is_set():
                        return
                    if not line:
                        continue
                    data = json.loads(line)
                    if data.get("type") != "event":
                        continue
                    watched.seen[data["id"]] = data["event"]
                    if data["event"].get("type") == "match_ended":
                        watched.over = True
        except httpx.HTTPError:
            await asyncio.sleep(0.2)


def shown(event: AnyEvent, seat: int | None = None) -> Any:
    """An event as a stream's line carries it to ``seat`` (None: a spectator), as JSON."""
    line = msgspec.json.encode(EventLine(id=0, event=redact(event, seat)))
    return json.loads(line)["event"]


def lost_events(log: list[Envelope], seen: dict[int, Any], seat: int | None = None) -> list[int]:
    """The versions shown to ``seat`` (None: a spectator) that the log does not hold as shown."""
    return [
        version
        for version, event in sorted(seen.items())
        if version > len(log) or shown(log[version - 1].event, seat) != event
    ]


def check_logs(logs: dict[str, list[Envelope]], watched: list[Watched]) -> list[str]:
    """Every match verifies; return the events shown to spectators that the log lost."""
    lost = []
    for w in watched:
        log = logs[w.match_id]
        problem = verify([e.event for e in log])
        assert problem is None, f"{w.match_id} v{problem.version}: {problem.message}"
        lost += [f"{w.match_id} v{version}" for version in lost_events(log, w.seen)]
    return lost
