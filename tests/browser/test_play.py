"""The play page: a person plays a whole match against a house bot, with the mouse."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect

from tests.browser.service import Service
from tests.browser.table import screenshots

pytestmark = pytest.mark.browser

LEGAL = ".tile-button.legal, #draw.legal, #pass.legal"
MY_TURN_OR_OVER = """() => Boolean(
  document.querySelector('.tile-button.legal, #draw.legal, #pass.legal')
  || (document.querySelector('#result') && document.querySelector('#result').checkVisibility())
)"""
MOVED_OR_ASKS_AN_END = """v => {
  const table = document.querySelector('#table');
  return table.dataset.version !== v
    || [...document.querySelectorAll('#end-choices button[data-end]')]
         .some((b) => b.checkVisibility());
}"""


FORKED = """() => {
  const ends = [...document.querySelectorAll('#ends li.end')]
    .map((e) => [e.dataset.end, e.dataset.number]);
  for (const b of document.querySelectorAll('#hand .tile-button.legal')) {
    const [x, y] = b.dataset.tile.split('-');
    const fits = ends.filter(([, n]) => n === x || n === y).map(([end]) => end);
    if (fits.length >= 2) return [b.dataset.tile, fits];
  }
  return null;
}"""


def start_against_the_bots(page: Page, name: str, target: int) -> str:
    """Fill in the lobby's "Play the bots" form (Express, two players, against random) and
    start; the new match's id, once its play page is open."""
    page.goto("/")
    page.fill("#player-name", name)
    page.select_option("#new-family", "express")
    page.select_option("#new-opponent", "random")
    page.select_option("#new-players", "2")
    page.fill("#new-target", str(target))
    page.click("#start-game")
    page.wait_for_url(re.compile(r"/play/m-[^/?]+\?seat=0$"))
    expect(page.locator("#page")).to_have_attribute("data-page", "play")
    found = re.search(r"/play/([^/?]+)", page.url)
    assert found is not None
    return found.group(1)


def version_of(page: Page) -> str:
    return page.locator("#table").get_attribute("data-version") or ""


def play_one_move(page: Page) -> None:
    """Click a legal control: a tile that fits two ends if there is one (each end is a move of
    its own, C6: the page must ask which, offering exactly those ends), else the first; return
    once the page shows the move made."""
    before = version_of(page)
    forked = page.evaluate(FORKED)
    button = page.locator(f"#hand .tile-button.legal[data-tile='{forked[0]}']") if forked else None
    (button or page.locator(LEGAL)).first.click()
    page.wait_for_function(MOVED_OR_ASKS_AN_END, arg=before)
    choices = page.locator("#end-choices button[data-end]")
    if forked:
        expect(choices).to_have_count(len(forked[1]))
        offered = choices.evaluate_all("bs => bs.map(b => b.dataset.end)")
        assert sorted(offered) == sorted(forked[1])
    if version_of(page) == before and choices.first.is_visible():
        choices.first.click()
    page.wait_for_function(
        "v => document.querySelector('#table').dataset.version !== v", arg=before
    )


def test_a_person_plays_a_whole_match_against_a_house_bot_by_clicking(
    page: Page, service: Service
) -> None:
    """From the lobby's form to the result: every move a click on a legal control; a draw
    asked for in Express is refused, and the page says which rule refused it (E1); the match
    ends when a side reaches the target (C9) and its log passes `domino verify`."""
    match_id = start_against_the_bots(page, "Ana", target=10)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator("#result")).to_be_hidden()

    page.wait_for_function(MY_TURN_OR_OVER)
    if not page.locator("#result").is_visible():
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        page.keyboard.press("w")  # a draw, which Express never allows
        expect(page.locator("#message")).to_contain_text("E1")
        expect(page.locator("#message")).to_have_attribute("role", "alert")

    moves = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        page.wait_for_function(MY_TURN_OR_OVER)
        if page.locator("#result").is_visible():
            break
        if moves == 2:
            screenshots(page, "play")
        play_one_move(page)
        moves += 1
    expect(page.locator("#result")).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "over")
    assert moves > 0

    summary = service.wait_over(match_id)
    assert summary["status"] == "finished"
    assert max(summary["scores"]) >= 10, summary  # nobody resigned or timed out
    result = page.locator("#result").inner_text()
    for score in summary["scores"]:
        assert str(score) in result
    screenshots(page, "play-over")
    service.domino("verify", match_id)  # exits 0: every event follows the rules
