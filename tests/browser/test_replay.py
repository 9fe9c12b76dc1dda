"""The replay page: any event of a finished match, shown exactly as `domino replay` shows it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Finished
from tests.browser.service import Service
from tests.browser.table import expected_table, faces, screenshots, shown_table, tile_name

pytestmark = pytest.mark.browser


@dataclass(frozen=True)
class Replayed:
    """The replayed match, the events worth stopping at, and what `domino replay` shows there."""

    match_id: str
    mid: int  # in the middle of the first round
    round_end: int  # the first round's end
    last: int
    views: dict[tuple[int, int | None], dict[str, Any]]


@pytest.fixture(scope="module")
def replayed(service: Service, finished: Finished) -> Replayed:
    """`domino replay --json` of the finished match at each stop, public and for seats 1, 2."""
    match_id = finished.replayed
    events = service.events(match_id)
    round_end = next(v for v, e in enumerate(events, 1) if e["type"] == "round_ended")
    mid, last = round_end - 3, len(events)
    wanted = [(1, None), (mid, None), (round_end, None), (last, None), (mid, 1), (mid, 2)]
    return Replayed(match_id, mid, round_end, last, service.replay_views(match_id, wanted))


def at(page: Page, version: int) -> None:
    """Wait until the page shows event ``version``."""
    expect(page.locator("#table")).to_have_attribute("data-version", str(version))


def test_the_replay_scrubbed_to_an_event_shows_the_position_domino_replay_prints(
    page: Page, replayed: Replayed
) -> None:
    """Keys, the scrubber and ?at=N all land on the same position as `domino replay --at N`:
    the line in play order, the open ends, hand sizes, stock, scores and round (C6, C9)."""
    r = replayed
    match_id, mid, round_end, last = r.match_id, r.mid, r.round_end, r.last
    views = {n: r.views[n, None] for n in (1, mid, round_end, last)}

    page.goto(f"/replay/{match_id}")
    expect(page.locator("#page")).to_have_attribute("data-page", "replay")
    at(page, last)  # opens on the last event
    scrubber = page.locator("input#scrubber")
    expect(scrubber).to_have_attribute("min", "1")
    expect(scrubber).to_have_attribute("max", str(last))
    assert shown_table(page) == expected_table(views[last])
    screenshots(page, "replay")

    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.keyboard.press("Home")
    at(page, 1)
    assert shown_table(page) == expected_table(views[1])
    for _ in range(mid - 1):
        page.keyboard.press("ArrowRight")
    at(page, mid)
    assert shown_table(page) == expected_table(views[mid])
    expect(page).to_have_url(re.compile(rf"[?&]at={mid}\b"))

    scrubber.fill(str(round_end))  # what dragging the thumb there does
    at(page, round_end)
    assert shown_table(page) == expected_table(views[round_end])
    expect(page).to_have_url(re.compile(rf"[?&]at={round_end}\b"))

    page.keyboard.press("End")
    at(page, last)
    assert shown_table(page) == expected_table(views[last])

    for n in (mid, round_end):
        page.goto(f"/replay/{match_id}?at={n}")
        at(page, n)
        assert shown_table(page) == expected_table(views[n])
        expect(scrubber).to_have_value(str(n))


def test_a_seat_view_of_the_replay_shows_that_seat_s_hand_and_no_other(
    page: Page, replayed: Replayed
) -> None:
    """Seat K's view of a finished match shows K's tiles face up and the others face down, as
    `domino replay --seat K` does (C8: what K could see then)."""
    match_id, mid = replayed.match_id, replayed.mid
    public, own, seat2 = (replayed.views[mid, k] for k in (None, 1, 2))

    page.goto(f"/replay/{match_id}?at={mid}")
    at(page, mid)
    assert all(not faces(page, k) for k in range(len(public["hand_sizes"])))
    page.select_option("select#seat-view", "1")
    expect(page).to_have_url(re.compile(r"[?&]seat=1\b"))
    expect(page.locator('.seat[data-seat="1"] .hand svg.tile[data-tile]')).to_have_count(
        len(own["hand"])
    )
    assert sorted(faces(page, 1)) == sorted(tile_name(t) for t in own["hand"])
    assert all(not faces(page, k) for k in (0, 2, 3))
    assert shown_table(page) == expected_table(own)
    screenshots(page, "replay-seat")

    page.goto(f"/replay/{match_id}?at={mid}&seat=2")
    at(page, mid)
    expect(page.locator("select#seat-view")).to_have_value("2")
    assert sorted(faces(page, 2)) == sorted(tile_name(t) for t in seat2["hand"])
