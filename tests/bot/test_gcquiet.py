"""bot.gcquiet: a sweep's objects stay out of full collections until its result is released."""

from __future__ import annotations

import asyncio
import gc
import weakref

from bot.gcquiet import QuietGc


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


class Result:
    pass


async def test_a_sweeps_objects_are_frozen_until_its_result_is_released() -> None:
    quiet = QuietGc(every_s=0.001)
    async with quiet.sweeping() as hold:
        cycle = Node()
        probe = weakref.ref(cycle)
        del cycle
        for _ in range(2):
            await asyncio.sleep(0)  # the freezer runs (it was started before the cycle)
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert probe() is not None  # frozen: no collection sees it
        result = Result()
    hold.until_released(result)
    gc.collect()
    assert probe() is not None and quiet.holding  # the result is still held
    del result  # released: the objects thaw, and the cycle is garbage again
    assert quiet.thaws == 1 and not quiet.holding
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert probe() is None


async def test_a_result_kept_too_long_thaws_after_max_hold() -> None:
    quiet = QuietGc(every_s=0.001, max_hold_s=0.0)
    async with quiet.sweeping() as hold:
        result = Result()
    hold.until_released(result)
    for _ in range(3):
        await asyncio.sleep(0)
    assert quiet.thaws == 1 and gc.get_freeze_count() == 0
    del result
    assert quiet.thaws == 1  # released once only


async def test_overlapping_sweeps_thaw_when_the_last_is_released() -> None:
    quiet = QuietGc(every_s=0.001)
    async with quiet.sweeping() as first:
        async with quiet.sweeping() as second:
            a, b = Result(), Result()
        second.until_released(b)
    first.until_released(a)
    del a
    assert quiet.holding and quiet.thaws == 0
    del b
    assert not quiet.holding and quiet.thaws == 1


async def test_a_failed_sweep_releases_at_once() -> None:
    quiet = QuietGc(every_s=0.001)
    try:
        async with quiet.sweeping():
            raise RuntimeError("probe bug")
    except RuntimeError:
        pass
    assert not quiet.holding and quiet.thaws == 1
