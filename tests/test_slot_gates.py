"""The slot gates: the background slot serves waiting work in priority order (compaction,
cron, heartbeat, tool summary), FIFO within a level; a cancelled waiter never wedges it."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.agent.locks import InFlight, SlotGates
from tether.core.timing.scheduling import Priority

BACKGROUND = 1


async def _serve_in_order(arrivals: list[Priority]) -> list[tuple[Priority, int]]:
    """Hold the gate, queue ``arrivals`` in order, release: the order they got it."""
    gates = SlotGates()
    served: list[tuple[Priority, int]] = []
    holding = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with gates.hold(BACKGROUND, Priority.TOOL_SUMMARY):
            holding.set()
            await release.wait()

    async def waiter(priority: Priority, n: int) -> None:
        async with gates.hold(BACKGROUND, priority):
            served.append((priority, n))
            await asyncio.sleep(0)

    first = asyncio.create_task(holder())
    await holding.wait()
    tasks = []
    for n, p in enumerate(arrivals):
        tasks.append(asyncio.create_task(waiter(p, n)))
        await asyncio.sleep(0)  # each is queued before the next arrives
    release.set()
    await asyncio.gather(first, *tasks)
    return served


def test_background_order_is_compaction_cron_heartbeat_summary() -> None:
    arrivals = [Priority.TOOL_SUMMARY, Priority.HEARTBEAT, Priority.CRON, Priority.COMPACTION]
    served = asyncio.run(_serve_in_order(arrivals))
    assert [p for p, _ in served] == [
        Priority.COMPACTION,
        Priority.CRON,
        Priority.HEARTBEAT,
        Priority.TOOL_SUMMARY,
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(Priority)), min_size=1, max_size=12))
def test_served_by_priority_then_arrival(arrivals: list[Priority]) -> None:
    served = asyncio.run(_serve_in_order(arrivals))
    assert served == sorted(((p, n) for n, p in enumerate(arrivals)), key=lambda x: (x[0], x[1]))


def test_a_cancelled_waiter_does_not_wedge_the_gate() -> None:
    async def scenario() -> list[str]:
        gates = SlotGates()
        order: list[str] = []
        release = asyncio.Event()

        async def hold_then_wait() -> None:
            async with gates.hold(BACKGROUND, Priority.CRON):
                await release.wait()

        async def take(name: str, priority: Priority) -> None:
            async with gates.hold(BACKGROUND, priority):
                order.append(name)

        first = asyncio.create_task(hold_then_wait())
        await asyncio.sleep(0)
        doomed = asyncio.create_task(take("doomed", Priority.COMPACTION))
        later = asyncio.create_task(take("later", Priority.TOOL_SUMMARY))
        await asyncio.sleep(0)
        doomed.cancel()
        release.set()
        await first
        await later
        with pytest.raises(asyncio.CancelledError):
            await doomed
        return order

    assert asyncio.run(scenario()) == ["later"]


def test_a_waiter_raised_while_queued_goes_first() -> None:
    """A tool summary that a compaction waits for is raised to the compaction's level."""

    async def scenario() -> list[str]:
        gates = SlotGates()
        inflight = InFlight()
        order: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with gates.hold(BACKGROUND, Priority.CRON):
                await release.wait()

        async def take(name: str, priority: Priority) -> None:
            async with gates.hold(BACKGROUND, priority):
                order.append(name)

        async def summary() -> None:
            def level() -> Priority:
                return Priority.COMPACTION if inflight.urgent("s") else Priority.TOOL_SUMMARY

            async with gates.hold(BACKGROUND, level):
                order.append("summary")
            inflight.end("s")

        inflight.begin("s")
        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        beat = asyncio.create_task(take("heartbeat", Priority.HEARTBEAT))
        summ = asyncio.create_task(summary())
        await asyncio.sleep(0)
        compaction = asyncio.create_task(inflight.settled("s"))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first, beat, summ, compaction)
        return order

    assert asyncio.run(scenario()) == ["summary", "heartbeat"]


def test_main_slot_is_first_come_first_served() -> None:
    served = asyncio.run(_serve_in_order([Priority.LIVE] * 5))
    assert [n for _, n in served] == [0, 1, 2, 3, 4]
