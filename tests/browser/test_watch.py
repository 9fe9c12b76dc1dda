"""The watch page: a live match as it is played, through a dropped connection, to its end."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

from tests.browser.service import Relay, Service
from tests.browser.table import expected_table, screenshots, shown_table

pytestmark = pytest.mark.browser

LOGGED = (
    "() => [...document.querySelectorAll('#log li[data-version]')].map(li => li.dataset.version)"
)


def version_of(page: Page) -> int:
    """The version of the view the page's table shows."""
    return int(page.locator("#table").get_attribute("data-version") or 0)


def test_the_watch_page_shows_each_move_as_it_arrives_and_survives_a_dropped_stream(
    page: Page, service: Service, relay: Relay
) -> None:
    """Moves appear as they are made; while the browser is offline the page says it is
    reconnecting, then resumes where it was: at the end (a resignation) it shows the match's
    last position, every event logged once and in order."""
    player = service.steady_match(pace=0.2, target=1000, start=False)
    match_id = player.match_id
    page.goto(f"{relay.url}/watch/{match_id}")
    expect(page.locator("#page")).to_have_attribute("data-page", "watch")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    service.play(player)

    log = page.locator("#log li[data-version]")
    expect(log.nth(5)).to_be_attached()
    seen = version_of(page)
    page.wait_for_function(
        "v => Number(document.querySelector('#table').dataset.version) > v", arg=seen
    )
    assert log.count() >= 6
    expect(page.locator("#line svg.tile").nth(5)).to_be_attached()  # a line worth a picture
    screenshots(page, "watch")

    cut_at = version_of(page)
    page.context.set_offline(True)  # the page cannot connect again until it is back
    relay.cut()
    expect(page.locator("#connection")).to_have_attribute("data-state", "reconnecting")
    time.sleep(2.0)
    assert service.version(match_id) > cut_at, "the match did not move on while offline"
    page.context.set_offline(False)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    back_at = version_of(page)
    assert back_at > cut_at  # what was played meanwhile, caught up
    page.wait_for_function(
        "v => Number(document.querySelector('#table').dataset.version) > v", arg=back_at
    )
    player.stopped.set()  # it resigns: the match ends

    expect(page.locator("#result")).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "over")
    last = service.version(match_id)
    assert version_of(page) == last
    assert page.evaluate(LOGGED) == [str(v) for v in range(1, last + 1)]
    assert shown_table(page) == expected_table(service.last_view(match_id))
    screenshots(page, "watch-over")


def test_the_watch_page_of_a_finished_match_shows_its_end(page: Page, service: Service) -> None:
    """A finished match opens on its last position and its result (C9)."""
    match_id = service.finished_match(["greedy", "random"], target=10)
    page.goto(f"/watch/{match_id}")
    expect(page.locator("#result")).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "over")
    last = service.version(match_id)
    expect(page.locator("#table")).to_have_attribute("data-version", str(last))
    assert shown_table(page) == expected_table(service.last_view(match_id))
