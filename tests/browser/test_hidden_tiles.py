"""C8 in the browser: a spectator's pages never receive, let alone show, a hidden tile."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Response, expect

from tests.browser.service import Service

pytestmark = pytest.mark.browser

WATCH_HANDS = """() => {
  window.faceUpInPlay = [];
  const look = () => {
    const table = document.querySelector('#table');
    if (!table || table.dataset.phase !== 'playing') return;
    const shown = [...document.querySelectorAll('.seat .hand svg.tile[data-tile]')];
    if (shown.length) {
      const names = shown.map((t) => t.dataset.tile).join(' ');
      window.faceUpInPlay.push(table.dataset.version + ': ' + names);
    }
  };
  const all = {subtree: true, childList: true, attributes: true};
  new MutationObserver(look).observe(document.body, all);
  look();
}"""


def collect(page: Page) -> list[Response]:
    """Every response the page gets from the API, from now on (bodies read later: a stream's
    body is whole once the stream has ended)."""
    responses: list[Response] = []
    page.on("response", lambda r: responses.append(r) if "/api/" in r.url else None)
    return responses


def documents(responses: list[Response]) -> Iterator[tuple[str, Any]]:
    """Each JSON document the page received: whole bodies, or each line of a stream."""
    for r in responses:
        body = r.body().decode()
        if "/stream" in r.url:
            for line in body.splitlines():
                line = line.removeprefix("data:").strip()
                if line.startswith("{"):
                    yield r.url, json.loads(line)
        elif body.strip():
            yield r.url, json.loads(body)


def leaks(doc: Any, where: str = "") -> Iterator[str]:
    """Every place in a received document where a spectator would learn a hidden tile (C8):
    a hand, the stock, the deal's seed (F1), a drawn tile or a legal move. Only a round's end
    reveals the hands and the seed."""
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from leaks(item, f"{where}[{i}]")
        return
    if not isinstance(doc, dict):
        return
    kind = doc.get("type")
    if kind == "round_ended":
        return  # its hands are shown to everyone: the round is over
    if kind == "turn":
        yield f"{where}: a turn line in a spectator's stream"
    if kind == "round_started":
        if any(h is not None for h in doc.get("hands") or ()):
            yield f"{where}.hands: {doc['hands']}"
        for key in ("stock", "forced_lead", "seed", "salt"):  # the seed gives the deal away
            if doc.get(key) is not None:
                yield f"{where}.{key}: {doc[key]}"
    if kind == "tile_drawn" and doc.get("tile") is not None:
        yield f"{where}.tile: {doc['tile']}"
    if "hand" in doc and doc["hand"] is not None:
        yield f"{where}.hand: {doc['hand']}"
    if doc.get("legal"):
        yield f"{where}.legal: {doc['legal']}"
    for key, value in doc.items():
        if key != "last_round":  # a View's last round is a round_ended: public
            yield from leaks(value, f"{where}.{key}")


def test_a_spectator_s_pages_never_receive_a_hidden_tile_over_a_whole_match(
    browse: Callable[..., Page], service: Service
) -> None:
    """C8: everything the watch page and the live replay page receive over a whole Straight
    match (draws included, S3) hides every hand and the deal's seed (F1) until its round ends,
    the stock, and every drawn tile; and no seat's hand is shown face up while a round is
    played."""
    player = service.steady_match(pace=0.1, family="straight", target=100, start=False)
    match_id = player.match_id
    watch = browse()
    watched = collect(watch)
    watch.goto(f"/watch/{match_id}")
    expect(watch.locator("#connection")).to_have_attribute("data-state", "live")
    watch.evaluate(WATCH_HANDS)
    service.play(player)

    replay = browse()
    replayed = collect(replay)
    expect(watch.locator("#log li[data-version]").nth(2)).to_be_attached()  # dealt, so on
    player.going.clear()  # the match stays live until the replay page has read it
    try:
        with replay.expect_response(lambda r: urlsplit(r.url).path.endswith("/replay")):
            replay.goto(f"/replay/{match_id}")  # a live match's public replay, so far
    finally:
        player.going.set()
    expect(replay.locator("#page")).to_have_attribute("data-page", "replay")

    expect(watch.locator("#result")).to_be_visible(timeout=90_000)
    expect(watch.locator("#connection")).to_have_attribute("data-state", "over")
    replay.wait_for_load_state("networkidle")

    received = [*documents(watched), *documents(replayed)]
    assert any("/stream" in url for url, _ in received), "the watch page read no stream"
    frames = [d for url, d in received if urlsplit(url).path.endswith("/replay")]
    assert frames and frames[0]["status"] == "live", "the replay page read no live frames"
    found = [f"{url}: {leak}" for url, doc in received for leak in leaks(doc)]
    assert found == [], "\n".join(found[:20])
    assert watch.evaluate("() => window.faceUpInPlay") == []
    draws = sum(e["type"] == "tile_drawn" for e in service.events(match_id))
    streamed = [d for url, d in received if "/stream" in url and d.get("type") == "event"]
    assert sum(d["event"]["type"] == "tile_drawn" for d in streamed) >= draws  # each one seen
