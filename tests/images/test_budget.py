"""cannaspider/images/budget.py: the pixels held add up, work beyond the budget waits for room (what
fits going ahead of what does not, a bounded number of times), one image over the whole budget
runs alone, a cancelled waiter gives its turn."""

from __future__ import annotations

import asyncio

import pytest

from cannaspider.images.budget import PixelBudget


async def work(budget: PixelBudget, name: str, pixels: int, started: list[str], release: asyncio.Event) -> None:
    """Hold `pixels` from when it is granted (its name added to `started`) until `release` is set."""
    async with budget.hold(pixels):
        started.append(name)
        await release.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_holds_add_up_and_are_given_back():
    async def run() -> None:
        budget = PixelBudget(100)
        async with budget.hold(30):
            async with budget.hold(70):
                assert (budget.held, budget.waiting) == (100, 0)
            assert budget.held == 30
        assert (budget.held, budget.peak) == (0, 100)

    asyncio.run(run())


def test_work_beyond_the_budget_waits_and_what_fits_goes_first():
    async def run() -> None:
        budget = PixelBudget(100)
        started: list[str] = []
        release = {name: asyncio.Event() for name in "abcde"}

        tasks = [
            asyncio.create_task(work(budget, n, p, started, release[n]))
            for n, p in (("a", 60), ("b", 60), ("c", 10), ("d", 30), ("e", 5))
        ]
        await settle()
        # b does not fit beside a; c and d do, and go ahead of it; e waits for room like b
        assert (started, budget.held, budget.waiting) == (["a", "c", "d"], 100, 2)
        release["a"].set()
        await settle()
        assert (started, budget.held) == (["a", "c", "d", "b"], 100)  # b first: e did not fit either
        release["c"].set()
        await settle()
        assert (started[-1], budget.held, budget.waiting) == ("e", 95, 0)
        for event in release.values():
            event.set()
        await asyncio.gather(*tasks)
        assert (budget.held, budget.peak, budget.waiting) == (0, 100, 0)

    asyncio.run(run())


def test_a_waiter_passed_over_enough_times_holds_back_those_behind_it():
    async def run() -> None:
        budget = PixelBudget(100, max_overtakes=2)
        release = asyncio.Event()
        order: list[str] = []

        first = asyncio.create_task(work(budget, "first", 50, order, release))
        await settle()
        big = asyncio.create_task(work(budget, "big", 100, order, release))
        small = [asyncio.create_task(work(budget, f"s{n}", 10, order, release)) for n in range(4)]
        await settle()
        # two small ones went ahead of the big one; then it is its turn, and the others wait with it
        assert order == ["first", "s0", "s1"] and budget.waiting == 3
        release.set()
        await asyncio.gather(first, big, *small)
        assert order[:4] == ["first", "s0", "s1", "big"]

    asyncio.run(run())


def test_an_image_over_the_whole_budget_runs_alone():
    async def run() -> None:
        budget = PixelBudget(100)
        release = asyncio.Event()
        small_done = asyncio.Event()

        async def small() -> None:
            async with budget.hold(10):
                await small_done.wait()

        first = asyncio.create_task(small())
        await settle()

        async def huge() -> None:
            async with budget.hold(10_000):
                assert budget.held == 100  # all of it, nothing beside it
                await release.wait()

        big = asyncio.create_task(huge())
        await settle()
        assert budget.waiting == 1
        small_done.set()
        await settle()
        assert (budget.held, budget.waiting) == (100, 0)
        release.set()
        await asyncio.gather(first, big)
        assert budget.held == 0

    asyncio.run(run())


def test_a_cancelled_waiter_gives_its_turn_to_the_next():
    async def run() -> None:
        budget = PixelBudget(100, max_overtakes=0)  # in order of arrival only
        release = asyncio.Event()
        got: list[str] = []

        first = asyncio.create_task(work(budget, "a", 90, got, release))
        await settle()
        blocked = asyncio.create_task(work(budget, "b", 50, got, release))
        behind = asyncio.create_task(work(budget, "c", 10, got, release))
        await settle()
        assert got == ["a"] and budget.waiting == 2
        blocked.cancel()
        await settle()
        assert got == ["a", "c"] and budget.held == 100 and budget.waiting == 0
        release.set()
        await asyncio.gather(first, behind)
        with pytest.raises(asyncio.CancelledError):
            await blocked
        assert budget.held == 0

    asyncio.run(run())
