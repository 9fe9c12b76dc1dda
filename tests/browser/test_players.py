"""The players pages: the ratings table, and one player's results and rating over time."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Finished
from tests.browser.service import Service
from tests.browser.table import screenshots

pytestmark = pytest.mark.browser

GREEDY = "house:greedy"


def rated(service: Service, key: str, matches: int) -> dict[str, object]:
    """Wait until the projector has rated ``key`` after ``matches`` matches; its page's data."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        player = service.get(f"/players/{quote(key, safe='')}")
        if len(player["history"]) >= matches:
            return dict(player)
        time.sleep(0.2)
    pytest.fail(f"{key} was not rated after {matches} matches in 20 s")


def test_the_ratings_list_the_house_bots_and_a_player_page_charts_its_rating(
    page: Page, service: Service, finished: Finished
) -> None:
    """Every finished match moves the ratings of its players; the players page lists them
    best first, and a player's page charts its rating after each match and lists its recent
    matches, each linked to its replay (C9: a match counts once it has ended)."""
    rated(service, GREEDY, len(finished.all))
    before = [r["key"] for r in service.get("/ratings", family="express")["ratings"]]
    page.goto("/players")
    expect(page.locator("#page")).to_have_attribute("data-page", "players")
    ratings = page.locator("#ratings tr[data-key]")
    expect(ratings.first).to_be_visible()
    keys = ratings.evaluate_all("rows => rows.map(r => r.dataset.key)")
    expected = [r["key"] for r in service.get("/ratings", family="express")["ratings"]]
    assert keys in (before, expected)  # a match finishing meanwhile may move them
    assert {GREEDY, "house:random"} <= set(keys)
    screenshots(page, "players")

    page.select_option("#ratings-family", "straight")
    straight = [r["key"] for r in service.get("/ratings", family="straight")["ratings"]]
    expect(ratings).to_have_count(len(straight))
    page.select_option("#ratings-family", "express")
    expect(ratings).to_have_count(len(expected))

    page.locator(f'#ratings tr[data-key="{GREEDY}"] a').first.click()
    page.wait_for_url(f"**/players/{quote(GREEDY, safe='')}")
    expect(page.locator("#page")).to_have_attribute("data-page", "player")
    expect(page.locator("#player-name-title")).to_contain_text("greedy")
    chart = page.locator("#rating-chart svg")
    expect(chart).to_be_visible()
    recent = page.locator("#recent tr[data-match-id]")
    expect(recent.first).to_be_visible()
    player = service.get(f"/players/{quote(GREEDY, safe='')}")  # as the page read it
    marks = chart.locator("circle")
    if marks.count():
        expect(marks).to_have_count(len(player["history"]))
    else:  # a line through the points
        expect(chart.locator("polyline, path")).not_to_have_count(0)
    shown = recent.evaluate_all("rows => rows.map(r => r.dataset.matchId)")
    assert shown == [r["match_id"] for r in player["recent"]]
    for match_id in shown:
        expect(page.locator(f'#recent a[href="/replay/{match_id}"]')).not_to_have_count(0)
    expect(page.locator("#results")).to_be_visible()
    screenshots(page, "player")
