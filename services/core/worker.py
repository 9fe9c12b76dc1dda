"""The loops of a consumer: read a batch, handle it, claim what dead consumers left pending."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from services.transport.base import Consumer, Entry

log = structlog.get_logger()


class GroupWorker:
    """The loops of one consumer: new entries in batches — the next read overlapping the work
    on the current one, and up to ``overlap`` batches handled side by side — entries claimed
    from consumers that died, and any periodic tasks the subclass adds; all until ``stop()``.
    Subclasses implement ``handle`` (safe to run beside itself when ``overlap`` > 1)."""

    reader: Consumer
    claim_idle_ms: int
    what: str = "entries"  # for log lines
    overlap: int = 1
    """How many batches are handled at once: more than one lets a batch be decided while the
    one before waits on its round trip."""

    def __init__(self) -> None:
        self._stopping = asyncio.Event()

    async def handle(self, entries: list[Entry]) -> None:
        """Process a batch; acknowledge what is done."""
        raise NotImplementedError

    async def step(self) -> int:
        """Read and handle one batch of new entries, without the loops; return its size."""
        entries = await self._fetch()
        await self._handle(entries)
        return len(entries)

    async def _fetch(self, pending: bool = False) -> list[Entry]:
        """The next batch, held by the reader from the moment it is read (see ``_handle``)."""
        entries = await self.reader.read(pending=pending)
        self.reader.hold(entries)
        return entries

    async def _handle(self, entries: list[Entry]) -> None:
        """Handle a batch the reader holds, and let go of it however that ends: until then
        no claim, ours or another loop's, takes its entries back however long it takes (a
        command decided twice side by side could be refused once and applied the second
        time); after, whatever stayed pending may be claimed and handled again."""
        try:
            if entries:
                await self.handle(entries)
        finally:
            self.reader.release(entries)

    def stop(self) -> None:
        """Ask ``serve`` to return after the batch in hand."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` was called."""
        return self._stopping.is_set()

    async def until_done(self, what: str, action: Callable[[], Coroutine[Any, Any, None]]) -> bool:
        """Run ``action`` until it succeeds, retrying with a growing pause (to 2 s) while it
        fails — Redis away, say — or until ``stop()``; return whether it succeeded."""
        pause = 0.1
        while not self.stopping:
            try:
                await action()
                return True
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning(f"{what} failed; trying again", error=str(e), retry_in_s=pause)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), pause)
                pause = min(pause * 2, 2.0)
        return False

    async def own(self) -> None:
        """Renew and rebalance this consumer's partition leases, and read only the partitions
        held: a subclass that shares its partitions by lease says how."""

    def lease_loop(self, lease_ms: int) -> Callable[[], Coroutine[Any, Any, None]]:
        """A periodic task for :meth:`serve`: :meth:`own` four times a lease's length, a round
        that fails said in the log (the next may work before the lease runs out)."""

        async def loop() -> None:
            while not self.stopping:
                await asyncio.sleep(lease_ms / 4000)
                try:
                    await self.own()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("lease renewal failed", of=self.what)

        return loop

    async def _own_pending(self) -> None:
        await self._handle(await self._fetch(pending=True))

    async def serve(self, *periodic: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run the read and reclaim loops and ``periodic`` tasks until ``stop()``."""
        # our own pending entries first, after a crash
        if not await self.until_done(f"reading our pending {self.what}", self._own_pending):
            return
        loops = [self._read_loop(), self._reclaim_loop(), *(task() for task in periodic)]
        tasks: list[asyncio.Task[None]] = [asyncio.create_task(loop) for loop in loops]
        try:
            await self._stopping.wait()
        finally:
            for task in tasks:
                task.cancel()
            # each loop also stops on its own once stopping: a cancel the Redis client took
            # for its own timeout (Python 3.11's asyncio.timeout) does not hold the stop up
            await asyncio.wait(tasks, timeout=5.0)
            await self.reader.close()

    async def _read_loop(self) -> None:
        slots = asyncio.Semaphore(self.overlap)
        handling: set[asyncio.Task[None]] = set()
        reading = asyncio.create_task(self._fetch())
        try:
            while not self.stopping:
                try:
                    entries = await reading
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception(f"reading {self.what} failed")
                    await asyncio.sleep(0.5)
                    reading = asyncio.create_task(self._fetch())
                    continue
                await slots.acquire()
                reading = asyncio.create_task(self._fetch())
                task = asyncio.create_task(self._handle_in_slot(entries, slots))
                handling.add(task)
                task.add_done_callback(handling.discard)
        finally:
            reading.cancel()
            for task in handling:
                task.cancel()
            if handling:  # each lets go of its batch before the reader closes
                await asyncio.wait(handling, timeout=5.0)

    async def _handle_in_slot(self, entries: list[Entry], slots: asyncio.Semaphore) -> None:
        try:
            await self._handle(entries)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(f"a batch of {self.what} failed; it stays pending")
            await asyncio.sleep(0.5)
        finally:
            slots.release()

    async def _reclaim_loop(self) -> None:
        idle = self.claim_idle_ms
        while not self.stopping:
            await asyncio.sleep(idle / 2000)
            try:
                entries = await self.reader.claim(idle)
                self.reader.hold(entries)
                if entries:
                    log.info(f"claimed pending {self.what}", count=len(entries))
                await self._handle(entries)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(f"reclaiming {self.what} failed")
