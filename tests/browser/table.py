"""What a page shows, read from its DOM (the element ids and data attributes the pages keep for
their tests), compared with the View the service computes, and screenshots of pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page, ViewportSize

ARTIFACTS = Path(__file__).parent / "artifacts"
PHONE: ViewportSize = {"width": 375, "height": 667}

READ_TABLE = """() => {
  const one = (s) => document.querySelector(s);
  const all = (s, root = document) => [...root.querySelectorAll(s)];
  const table = one('#table');
  const scores = {};
  for (const td of all('#scores td[data-side]')) scores[td.dataset.side] = td.textContent.trim();
  const seats = {};
  for (const seat of all('.seat[data-seat]')) {
    seats[seat.dataset.seat] = {
      count: seat.dataset.count,
      turn: seat.dataset.turn === 'true',
      faces: all('.hand svg.tile[data-tile]', seat).map((t) => t.dataset.tile),
      backs: all('.hand svg.tile.back', seat).length,
    };
  }
  return {
    version: table && table.dataset.version,
    phase: table && table.dataset.phase,
    line: all('#line svg.tile').map(
      (t) => [Number(t.dataset.order), t.dataset.tile, t.dataset.end]),
    ends: all('#ends li.end').map((e) => [e.dataset.end, e.dataset.number]),
    seats,
    stock: one('#stock') && one('#stock').dataset.count,
    round: one('#round') && one('#round').dataset.round,
    scores,
  };
}"""


def read_table(page: Page) -> dict[str, Any]:
    """The position the page's table shows, as its DOM says it."""
    shown: dict[str, Any] = page.evaluate(READ_TABLE)
    return shown


def tile_name(tile: list[int]) -> str:
    """A tile as the pages name it: ``a-b``, in the order the service gives it."""
    return f"{tile[0]}-{tile[1]}"


def expected_table(view: dict[str, Any]) -> dict[str, Any]:
    """What the table must show of a View (as ``domino replay --json`` prints it)."""
    return {
        "version": str(view["version"]),
        "line": [tile_name(t) for t in view["played"]],
        "ends": sorted((e["end"], str(e["number"])) for e in view["ends"]),
        "counts": {str(k): str(n) for k, n in enumerate(view["hand_sizes"])},
        "stock": str(view["stock_size"]),
        "round": str(view["round"]),
        "scores": {str(s): str(n) for s, n in enumerate(view["scores"])},
    }


def shown_table(page: Page) -> dict[str, Any]:
    """The same facts as :func:`expected_table`, read from the page."""
    shown = read_table(page)
    return {
        "version": shown["version"],
        "line": [tile for _, tile, _ in sorted(shown["line"])],
        "ends": sorted((end, number) for end, number in shown["ends"]),
        "counts": {k: seat["count"] for k, seat in shown["seats"].items()},
        "stock": shown["stock"],
        "round": shown["round"],
        "scores": shown["scores"],
    }


def faces(page: Page, seat: int) -> list[str]:
    """The tiles shown face up in a seat's hand."""
    return list(read_table(page)["seats"][str(seat)]["faces"])


def screenshots(page: Page, name: str) -> None:
    """Save the whole page as it is now, at its own size and at a phone's (375x667), under
    tests/browser/artifacts/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    page.screenshot(path=ARTIFACTS / f"{name}-desktop.png", full_page=True)
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(150)  # a frame or two to lay out again
    page.screenshot(path=ARTIFACTS / f"{name}-phone.png", full_page=True)
    if size is not None:
        page.set_viewport_size(size)
