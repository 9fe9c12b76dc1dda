"""The lobby page: live, open and finished matches, kept up to date without a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.service import Service
from tests.browser.table import screenshots

pytestmark = pytest.mark.browser


def test_the_lobby_follows_live_matches_and_shows_new_ones_without_a_reload(
    page: Page, service: Service
) -> None:
    """A live match's row changes as it is played, and matches created after the page was
    opened appear in their tables, all without reloading the page (C9: a live match is one
    whose target no side has reached yet)."""
    live = service.steady_match(pace=0.2, target=100)
    page.goto("/")
    expect(page.locator("#page")).to_have_attribute("data-page", "lobby")
    page.evaluate("() => { window.openedOnce = true; }")  # gone if the page were reloaded

    row = page.locator(f'#live-matches tr[data-match-id="{live.match_id}"]')
    expect(row).to_be_visible()
    expect(row.locator(f'a[href="/watch/{live.match_id}"]')).not_to_have_count(0)
    before = row.inner_text()
    expect(row).not_to_have_text(before, timeout=40_000)  # its round or scores moved on

    waiting = service.create([None, "random"])
    opened = page.locator(f'#open-matches tr[data-match-id="{waiting}"]')
    expect(opened).to_be_visible()
    expect(opened.locator('button.take-seat[data-seat="0"]')).to_have_count(1)

    done = service.finished_match(["random", "greedy"], target=10)
    ended = page.locator(f'#finished-matches tr[data-match-id="{done}"]')
    expect(ended).to_be_visible()
    expect(ended.locator(f'a[href="/replay/{done}"]')).not_to_have_count(0)

    assert page.evaluate("() => window.openedOnce === true"), "the lobby reloaded itself"
    screenshots(page, "lobby")
    live.stopped.set()


def test_the_lobby_filters_by_family_and_by_player(page: Page, service: Service) -> None:
    """The family and player filters keep only the matching rows (E6 and S7 name the two
    families' targets: Express and Straight matches are listed apart)."""
    express = service.finished_match(["random", "greedy"], family="express", target=10)
    straight = service.finished_match(["random", "greedy"], family="straight", target=10)
    page.goto("/")
    rows = page.locator("#finished-matches")
    expect(rows.locator(f'tr[data-match-id="{express}"]')).to_be_visible()
    expect(rows.locator(f'tr[data-match-id="{straight}"]')).to_be_visible()

    page.select_option("#filter-family", "straight")
    expect(rows.locator(f'tr[data-match-id="{express}"]')).to_have_count(0)
    expect(rows.locator(f'tr[data-match-id="{straight}"]')).to_be_visible()

    page.select_option("#filter-family", "")
    page.fill("#filter-player", "nobody-plays-as-this")
    expect(rows.locator("tr[data-match-id]")).to_have_count(0)
    page.fill("#filter-player", "greedy")
    expect(rows.locator(f'tr[data-match-id="{express}"]')).to_be_visible()
