"""What every page's table is made of: tiles as named images, the line in play order, the
replay's controls, and the turn and its deadline while a match is live."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Finished
from tests.browser.service import Service
from tests.browser.table import tile_name

pytestmark = pytest.mark.browser

TILES = """() => [...document.querySelectorAll('svg.tile')].map((t) => ({
  role: t.getAttribute('role'),
  label: t.getAttribute('aria-label'),
  tile: t.getAttribute('data-tile'),
  back: t.classList.contains('back'),
}))"""
LINE = """() => [...document.querySelectorAll('#line svg.tile')].map((t) => ({
  order: Number(t.dataset.order), tile: t.dataset.tile, end: t.dataset.end,
  cross: t.classList.contains('cross'),
}))"""


def frames(service: Service, match_id: str) -> list[dict[str, Any]]:
    """The public replay of a match, frame by frame."""
    found: list[dict[str, Any]] = service.get(f"/matches/{match_id}/replay")["frames"]
    return found


def test_every_tile_is_an_image_named_by_its_pips_and_hidden_tiles_are_backs(
    page: Page, service: Service, finished: Finished
) -> None:
    """C8 in the markup: a hidden tile is a back named "hidden tile" with no data-tile; a shown
    one is an image named "a-b". The line's tiles carry their play order and the end they went
    on (C6), the lead first."""
    match_id = finished.replayed
    replay = frames(service, match_id)
    mid = next(f["id"] for f in replay if len(f["view"]["played"]) >= 5)
    view = replay[mid - 1]["view"]
    page.goto(f"/replay/{match_id}?at={mid}")
    expect(page.locator("#table")).to_have_attribute("data-version", str(mid))
    expect(page.locator("#page")).to_have_attribute("data-page", "replay")
    expect(page.locator('nav a[href="/"]').first).to_be_attached()
    expect(page.locator('nav a[href="/players"]').first).to_be_attached()

    tiles = page.evaluate(TILES)
    assert tiles and all(t["role"] == "img" for t in tiles)
    for t in tiles:
        if t["back"]:
            assert (t["label"], t["tile"]) == ("hidden tile", None), t
        else:
            assert re.fullmatch(r"\d+-\d+", t["tile"] or "") and t["label"] == t["tile"], t
    assert sum(t["back"] for t in tiles) >= sum(view["hand_sizes"])

    line = sorted(page.evaluate(LINE), key=lambda t: t["order"])
    assert [t["order"] for t in line] == list(range(len(view["played"])))
    assert [t["tile"] for t in line] == [tile_name(t) for t in view["played"]]
    assert line[0]["end"] == "lead"
    assert all(t["end"] in ("left", "right", "up", "down") for t in line[1:])
    for t in line:
        a, b = t["tile"].split("-")
        if t["cross"]:
            assert a == b, f"{t['tile']} lies crosswise but is no double"

    expect(page.locator("#turn")).to_have_attribute("data-seat", str(view["turn"]))
    expect(page.locator("#score-chart svg")).to_be_attached()
    assert page.locator("#log").evaluate("e => e.tagName") == "OL"


def test_the_replay_controls_step_jump_and_play(
    page: Page, service: Service, finished: Finished
) -> None:
    """The replay's buttons step and jump, Space plays and pauses, the speed offers 0.5 to 8
    events a second, and a finished match offers every seat's view (C8: only once over)."""
    match_id = finished.replayed
    last = len(frames(service, match_id))
    page.goto(f"/replay/{match_id}?at=5")
    version = page.locator("#table")
    expect(version).to_have_attribute("data-version", "5")
    page.click("#next")
    expect(version).to_have_attribute("data-version", "6")
    page.click("#prev")
    expect(version).to_have_attribute("data-version", "5")
    page.click("#first")
    expect(version).to_have_attribute("data-version", "1")
    page.click("#last")
    expect(version).to_have_attribute("data-version", str(last))

    speeds = page.locator("select#speed option").evaluate_all("os => os.map(o => o.value)")
    assert speeds == ["0.5", "1", "2", "4", "8"]
    seats = page.locator("select#seat-view option").evaluate_all(
        "os => os.map(o => [o.value, o.disabled])"
    )
    assert seats == [["", False], ["0", False], ["1", False], ["2", False], ["3", False]]

    page.click("#first")
    page.select_option("select#speed", "8")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.keyboard.press("Space")
    page.wait_for_function("() => Number(document.querySelector('#table').dataset.version) >= 4")
    page.keyboard.press("Space")
    paused = version.get_attribute("data-version")
    page.wait_for_timeout(600)  # five events' time at 8 a second
    assert version.get_attribute("data-version") == paused


def test_a_live_match_shows_whose_turn_it_is_and_the_seconds_left(
    page: Page, service: Service
) -> None:
    """While a match is played the page names the seat to move, counts its deadline down, and
    keeps the result hidden; a live match's replay offers no seat's view (C8)."""
    player = service.steady_match(pace=2.5, target=100)
    page.goto(f"/watch/{player.match_id}")
    expect(page.locator("#result")).to_be_hidden()
    expect(page.locator("#turn")).to_have_attribute("data-seat", re.compile(r"^[01]$"))
    deadline = page.locator("#deadline")
    expect(deadline).to_have_text(re.compile(r"\d"))
    expect(deadline).not_to_have_text(deadline.inner_text())  # it counts

    page.goto(f"/replay/{player.match_id}")
    expect(page.locator("#table")).to_have_attribute("data-version", re.compile(r"^\d+$"))
    seats = page.locator("select#seat-view option").evaluate_all(
        "os => os.map(o => [o.value, o.disabled])"
    )
    assert seats == [["", False], ["0", True], ["1", True]]
    player.stopped.set()
