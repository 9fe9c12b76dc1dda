"""The pages in a real browser: Debian's Chromium driven by Playwright, against one hosted stack
(referee, house bots, projector, gateway) on the session's Redis node.

Chromium is looked for in DOMINO_CHROMIUM, then on PATH (chromium, chromium-browser,
google-chrome); without one every test here is skipped with one message saying how to get it.
The browser and the stack live while this directory's tests run (package scope), not for the
rest of a whole-suite run. Each test gets a fresh browser context (nothing shared: cookies,
sessionStorage); a failed test leaves a screenshot of its pages in tests/browser/artifacts/,
and the stack's processes write their logs to tests/browser/artifacts/stack/.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    ViewportSize,
    expect,
    sync_playwright,
)

from services.cli.supervisor import Stack
from services.config import Settings
from tests.browser.service import Relay, Service, relaying, serving
from tests.browser.table import ARTIFACTS, PHONE
from tests.gateway.conftest import PLAY_LIMITS, Gateways, free_port, wait_healthy, wait_served
from tests.support.tools import in_ci, missing

HERE = Path(__file__).parent
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
LIMITS = {  # a person's pace is no threat: nothing here should ever meet a limit
    **PLAY_LIMITS,
    "DOMINO_GATEWAY_STREAMS_PER_CLIENT": "100000",
    "DOMINO_GATEWAY_STREAMS_PER_TOKEN": "16",
    "DOMINO_GATEWAY_REJECTED_MOVES_PER_S": "100",
    "DOMINO_GATEWAY_REJECTED_MOVE_BURST": "100",
    "DOMINO_GATEWAY_MOVES_PER_S": "100",
    "DOMINO_GATEWAY_MOVE_BURST": "100",
}
expect.set_options(timeout=20_000)  # a loaded machine can be slow to show a move
NO_CHROMIUM = (
    "no Chromium for the browser tests (looked in DOMINO_CHROMIUM, then for "
    + ", ".join(CANDIDATES)
    + " on PATH): install one with `apt-get install chromium`, or set DOMINO_CHROMIUM to its path"
)


def find_chromium() -> str | None:
    """The Chromium to drive: DOMINO_CHROMIUM if set, else the first one on PATH."""
    asked = os.environ.get("DOMINO_CHROMIUM")
    if asked:
        return asked if os.access(asked, os.X_OK) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a Chromium, skip the tests of this directory (before their stack starts); under
    CI, which installs one, they run and fail instead."""
    if find_chromium() is not None or in_ci():
        return
    skip = pytest.mark.skip(reason=NO_CHROMIUM)
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the test, so its pages know whether it failed; and place
    every skip for want of a Chromium here, so that -ra prints its reason once."""
    report: pytest.TestReport = yield
    if report.skipped and isinstance(report.longrepr, tuple) and NO_CHROMIUM in report.longrepr[2]:
        report.longrepr = (__file__, 0, report.longrepr[2])  # -ra folds them into one line
    item.stash.setdefault(REPORTS, {})[report.when] = report
    return report


REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One headless Chromium for these tests."""
    path = find_chromium()
    if path is None:  # under CI only: elsewhere the tests were skipped
        missing(NO_CHROMIUM)
    for stale in ARTIFACTS.glob("failed-*.png"):
        stale.unlink()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="package")
def service(node_redis_url: str) -> Iterator[Service]:
    """Referee, random and greedy house bots, projector and one gateway with limits no person
    meets, on the session's Redis node (the pages do not depend on Redis's topology)."""
    settings = Settings(
        redis_url=node_redis_url,
        prefix=f"b{uuid.uuid4().hex[:10]}",
        partitions=4,
        claim_idle_ms=600,
        log_level="warning",
    )
    logs = ARTIFACTS / "stack"
    shutil.rmtree(logs, ignore_errors=True)
    pools = {"random": 1, "greedy": 1}
    with Stack(node_redis_url, settings, pools=pools, log_dir=logs) as stack:
        gateways = Gateways(stack, settings, node_redis_url, "", "")
        gateways.url = spawn_gateway(stack, logs / "gateway.log")
        wait_served(node_redis_url, settings, list(pools))
        with serving(gateways) as s:
            yield s


def spawn_gateway(stack: Stack, log: Path) -> str:
    """Start a gateway on the stack, with :data:`LIMITS`, stopped with it; its URL once it
    answers (a loaded machine may take a while to start a Python process)."""
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.cli.main", "gateway", "--port", str(port)],
            env={**stack.env(), **LIMITS, "DOMINO_GATEWAY_HOST": "127.0.0.1"},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    stack.processes["gateway"] = process
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, process, timeout=90.0)
    return url


@pytest.fixture
def browse(
    browser: Browser, service: Service, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Page]]:
    """Open a page in a fresh context (``phone=True``: 375x667); each page's uncaught errors and
    CSP refusals fail the test, and a failed test leaves screenshots of its pages."""
    contexts: list[BrowserContext] = []
    problems: list[str] = []

    def open_page(phone: bool = False) -> Page:
        context = browser.new_context(
            base_url=service.url, viewport=PHONE if phone else DESKTOP, is_mobile=False
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
        page.on("console", lambda m: _note_refusal(m, problems))
        return page

    yield open_page
    reports = request.node.stash.get(REPORTS, {})
    if "call" in reports and reports["call"].failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for i, context in enumerate(contexts):
            for j, page in enumerate(context.pages):
                with contextlib.suppress(Exception):
                    page.screenshot(
                        path=ARTIFACTS / f"failed-{request.node.name}-{i}-{j}.png", full_page=True
                    )
    for context in contexts:
        with contextlib.suppress(Exception):
            context.close()
    if problems:
        pytest.fail("the page reported:\n" + "\n".join(problems), pytrace=False)


def _note_refusal(message: ConsoleMessage, problems: list[str]) -> None:
    """A console line saying the browser refused something the page did (CSP)."""
    if message.type == "error" and "Content Security Policy" in message.text:
        problems.append(f"refused: {message.text}")


@pytest.fixture
def relay(service: Service) -> Iterator[Relay]:
    """A relay to the gateway whose connections the test can cut."""
    with relaying(service.url) as r:
        yield r


@pytest.fixture
def page(browse: Callable[..., Page]) -> Page:
    """A desktop-sized page (1280x800) in a fresh context."""
    return browse()


@dataclass(frozen=True)
class Finished:
    """Matches between house bots played to the end before the tests that read them."""

    replayed: str  # Express, 4 players in pairs, more than one round
    others: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        return (self.replayed, *self.others)


@pytest.fixture(scope="package")
def finished(service: Service) -> Finished:
    """A few finished house-bot matches: one of several rounds to replay, and enough for the
    ratings to have a history."""
    seats = ["random", "greedy", "random", "greedy"]
    others: list[str] = []
    for _ in range(8):
        match_id = service.finished_match(seats, target=40)
        rounds = sum(e["type"] == "round_ended" for e in service.events(match_id))
        if rounds >= 2:
            return Finished(match_id, tuple(others))
        others.append(match_id)
    pytest.fail("eight Express matches to 40 points all ended in their first round")
