"""A phone-sized screen (375x667): no page scrolls sideways, and a person plays by keyboard,
every tile and control named for assistive technology."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import Finished
from tests.browser.service import Service

pytestmark = pytest.mark.browser

FITS = "() => document.documentElement.scrollWidth <= window.innerWidth"
MY_TURN = "() => Boolean(document.querySelector('.tile-button.legal, #draw.legal, #pass.legal'))"
MOVED_OR_ASKS_AN_END = """v => document.querySelector('#table').dataset.version !== v
  || [...document.querySelectorAll('#end-choices button[data-end]')]
       .some((b) => b.checkVisibility())"""
END_KEYS = {"left": "l", "right": "r", "up": "u", "down": "d"}


def fits(page: Page, what: str) -> None:
    """The page is no wider than the screen (only #line may scroll, inside its own box)."""
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert page.evaluate(FITS), f"the {what} page is {width[0]} px wide on a {width[1]} px screen"


def version_of(page: Page) -> str:
    return page.locator("#table").get_attribute("data-version") or ""


def key_for_a_legal_move(page: Page) -> str:
    """The key that makes a legal move: pass, draw, or the digit of the first legal tile."""
    if page.locator("#pass.legal").count():
        return "p"
    if page.locator("#draw.legal").count():
        return "w"
    buttons = page.locator("#hand .tile-button")
    legal = buttons.evaluate_all("bs => bs.map(b => b.classList.contains('legal'))")
    return str(legal.index(True) + 1)


def press_a_legal_move(page: Page) -> None:
    """Make a legal move with keys alone; return once the page shows it made."""
    before = version_of(page)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.keyboard.press(key_for_a_legal_move(page))
    try:
        page.wait_for_function(MOVED_OR_ASKS_AN_END, arg=before, timeout=3_000)
    except PlaywrightTimeout:  # the digit chose the tile; Enter plays its only end
        page.keyboard.press("Enter")
        page.wait_for_function(MOVED_OR_ASKS_AN_END, arg=before)
    if version_of(page) == before:
        end = page.locator("#end-choices button[data-end]").first.get_attribute("data-end")
        page.keyboard.press(END_KEYS[end or ""])
    page.wait_for_function(
        "v => document.querySelector('#table').dataset.version !== v", arg=before
    )


def test_the_lobby_watch_and_play_pages_fit_a_phone_and_play_by_keyboard(
    browse: Callable[..., Page], service: Service, finished: Finished
) -> None:
    """At 375x667 nothing scrolls sideways; a seat is taken from the lobby and a few moves are
    played with keys alone (digits pick a tile, l/r/u/d an end, w draws, p passes: C6, E1);
    hand tiles are buttons named "play a-b", table tiles images named "a-b"."""
    page = browse(phone=True)
    match_id = service.create([None, "random"], target=10, deadline_ms=60_000)
    page.goto("/")
    expect(page.locator(f'#open-matches tr[data-match-id="{match_id}"]')).to_be_visible()
    fits(page, "lobby")

    page.fill("#player-name", "Bea")
    page.locator(
        f'#open-matches tr[data-match-id="{match_id}"] button.take-seat[data-seat="0"]'
    ).click()
    page.wait_for_url(re.compile(rf"/play/{match_id}\?seat=0$"))
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")

    moves = 0
    while moves < 3 and not page.locator("#result").is_visible():
        page.wait_for_function(MY_TURN + " || document.querySelector('#result').checkVisibility()")
        if page.locator("#result").is_visible():
            break
        hand = page.get_by_role("button", name=re.compile(r"^play \d+-\d+$"))
        expect(hand).to_have_count(page.locator("#hand .tile-button").count())
        assert hand.count() > 0
        if moves == 0:  # the other seat's tiles, face down while the round is played (C8)
            buttons = page.locator("#hand .tile-button").evaluate_all(
                "bs => bs.map(b => [b.classList.contains('legal'), b.ariaDisabled])"
            )
            assert all(disabled == str(not legal).lower() for legal, disabled in buttons)
            expect(page.get_by_role("img", name="hidden tile").first).to_be_attached()
            expect(page.get_by_role("button", name=re.compile("draw", re.I))).to_have_count(1)
            expect(page.get_by_role("button", name=re.compile("pass", re.I))).to_have_count(1)
        fits(page, "play")
        press_a_legal_move(page)
        moves += 1
    assert moves > 0
    token = page.evaluate(f"() => sessionStorage.getItem('domino.token.{match_id}.0')")
    assert token, "the lobby kept no seat token in sessionStorage"
    if not page.locator("#result").is_visible():
        service.resign(match_id, 0, token)  # nobody is left to play it
        expect(page.locator("#result")).to_be_visible()
    expect(page.get_by_role("img", name=re.compile(r"^\d+-\d+$")).first).to_be_visible()
    fits(page, "play")

    page.goto(f"/watch/{finished.replayed}")
    expect(page.locator("#result")).to_be_visible()
    fits(page, "watch")
    page.goto(f"/replay/{finished.replayed}")
    expect(page.locator("#table")).to_have_attribute("data-phase", re.compile(".+"))
    fits(page, "replay")
