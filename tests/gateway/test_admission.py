"""The admission of bulk reads and what is kept of finished matches, in this process: a burst
starts its limit at once and the rest at the rate, a read whose turn is too far away is told its
own turn, a place goes to the first waiting read; a finished answer is made once."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

import pytest

from services.gateway.admission import RETRY_MAX_S, Admission
from services.gateway.finished import Finished, Kept
from services.gateway.limits import LimitExceeded

pytestmark = pytest.mark.behaviour


def test_a_burst_of_bulk_reads_starts_its_limit_at_once_then_one_an_interval_after_another() -> (
    None
):
    async def scenario() -> list[float]:
        admission = Admission("bulk_reads", limit=2, rate=20, wait_s=1.0)
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        async def read() -> float:
            async with admission.place():
                return loop.time() - t0

        started = await asyncio.gather(*(read() for _ in range(4)))
        assert admission.active == 0
        return started

    started = asyncio.run(scenario())
    assert max(started[:2]) < 0.045  # the burst, at once
    assert started[2] >= 0.045 and started[3] - started[2] >= 0.045  # then at the rate


def test_a_bulk_read_whose_turn_is_too_far_away_is_refused_at_once_with_a_turn_of_its_own() -> None:
    async def scenario() -> list[float]:
        admission = Admission("bulk_reads", limit=1, rate=10, wait_s=0.15)
        first = await admission.take()
        waiting = asyncio.create_task(admission.take())  # its turn, 0.1 s on, is near enough
        await asyncio.sleep(0)
        retries = []
        for _ in range(3):
            with pytest.raises(LimitExceeded) as refused:
                await admission.take()
            assert refused.value.limit == "bulk_reads"
            retries.append(refused.value.retry_after)
        first.release()
        (await waiting).release()
        return retries

    retries = asyncio.run(scenario())
    assert 0.15 < retries[0] <= 0.2  # its turn, after the one waiting
    gaps = [b - a for a, b in itertools.pairwise(retries)]
    assert gaps == pytest.approx([0.1, 0.1], abs=0.01)  # the refused, one after the other


def test_a_place_goes_to_the_first_read_still_waiting_and_a_read_gives_up_after_its_wait() -> None:
    async def scenario() -> None:
        admission = Admission("bulk_reads", limit=1, rate=1000, wait_s=0.2)
        held = await admission.take()
        gone = asyncio.create_task(admission.take())
        second = asyncio.create_task(admission.take())
        await asyncio.sleep(0.01)
        assert admission.waiting == 2
        gone.cancel()  # its client went away while it waited
        await asyncio.gather(gone, return_exceptions=True)
        held.release()
        place = await second
        assert admission.active == 1 and admission.waiting == 0
        with pytest.raises(LimitExceeded):
            await admission.take()  # the place is held past its wait
        place.release()
        place.release()  # a second release changes nothing
        assert admission.active == 0

    asyncio.run(scenario())


def test_a_finished_answer_is_made_once_however_many_ask_and_the_least_used_leaves_first() -> None:
    async def scenario() -> None:
        finished = Finished(max_bytes=100)
        made: list[str] = []

        def maker(key: str, size: int) -> Callable[[], Awaitable[Kept | None]]:
            async def make() -> Kept | None:
                made.append(key)
                await asyncio.sleep(0.01)
                return Kept(b"x" * size)

            return make

        answers = await asyncio.gather(
            *(finished.get_or_make("a", maker("a", 40)) for _ in range(5))
        )
        assert made == ["a"] and {a.body for a in answers if a} == {b"x" * 40}
        await finished.get_or_make("b", maker("b", 40))
        assert finished.get("a") is not None  # "a" used last: "b" leaves first
        await finished.get_or_make("c", maker("c", 40))
        assert finished.get("b") is None and finished.get("a") and finished.get("c")
        assert finished.size == 80

    asyncio.run(scenario())


def test_a_stream_resumed_after_any_event_is_a_slice_of_the_kept_lines() -> None:
    kept = Kept(b"one\ntwo\nthree\n", (4, 8, 14))
    assert kept.lines(0, 3) == b"one\ntwo\nthree\n"
    assert kept.lines(1, 3) == b"two\nthree\n"
    assert kept.lines(2, 2) == b""


def test_a_client_that_never_waits_for_its_turn_does_not_push_the_others_turns_past_a_bound() -> (
    None
):
    async def scenario() -> float:
        admission = Admission("bulk_reads", limit=1, rate=1, wait_s=0.1)
        held = await admission.take()
        latest = 0.0
        for _ in range(50):  # each refused read told to come back a second after the last
            with pytest.raises(LimitExceeded) as refused:
                await admission.take()
            latest = max(latest, refused.value.retry_after)
        held.release()
        return latest

    assert asyncio.run(scenario()) <= RETRY_MAX_S
