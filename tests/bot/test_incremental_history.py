"""A sweep's metric windows merged for every job in one pipeline, against a real Redis.

The batch must store and return exactly what merging job by job does (same order, same
replacement of a repeated step, same cap), and the Sweeper must use it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from bot.config import Config
from bot.store import RedisStore
from probes.models import MetricPoint
from tests.bot.conftest import make_store

if TYPE_CHECKING:
    from bot.sweep_seams import SweepState


def points(*steps: int, loss: float = 1.0) -> list[MetricPoint]:
    return [MetricPoint(step=s, values={"loss": loss, "grad_norm": 0.1 * s}) for s in steps]


async def test_batch_merge_equals_job_by_job(store: RedisStore, redis_server: str) -> None:
    """Two sweeps merged as batches give every job the window job-by-job merging gives."""
    sweeps = [
        {"1": points(1, 2, 3), "2": points(5, 4), "3": [], "4": points(*range(1, 9))},
        {"1": points(3, 4, loss=0.5), "2": points(6), "3": points(1), "4": points(9, 10)},
    ]
    single = make_store(f"jt-test-{uuid.uuid4().hex[:10]}:", url=redis_server, window_len=6)
    batched = make_store(store.prefix, url=redis_server, window_len=6)
    try:
        for batch in sweeps:
            expected = {j: await single.merge_history("alpha", j, p) for j, p in batch.items()}
            assert await batched.merge_histories("alpha", batch) == expected
        assert [p.step for p in expected["4"]] == [5, 6, 7, 8, 9, 10]  # capped at window_len
        assert expected["1"][2].values["loss"] == 0.5  # a repeated step keeps its last value
        assert await batched.load_history("alpha", "2") == await single.load_history("alpha",
                                                                                     "2")
    finally:
        await single.delete_prefix()
        await single.aclose()
        await batched.aclose()


async def test_job_answer_reads_the_whole_stored_window(store: RedisStore) -> None:
    """A sweep kept only an unflagged job's last points; ``/job`` charts its whole window."""
    from types import SimpleNamespace

    from bot.slash_answers import whole_window
    from tests.report.factories import facts, judge, record

    await store.merge_histories("alpha", {"7": points(*range(1, 41))})
    detail = judge(facts(record("sft-x", "7", cluster="alpha"), points(39, 40)))
    assert [p.step for p in detail.history] == [39, 40]
    bot = SimpleNamespace(store=store)  # whole_window reads only the bot's store
    shown = await whole_window(bot, detail)  # type: ignore[arg-type]
    assert [p.step for p in shown.history] == list(range(1, 41))
    assert shown.report == detail.report
    assert await whole_window(bot, shown) is shown  # type: ignore[arg-type]  # unchanged


async def test_merge_replaces_only_the_new_steps(store: RedisStore) -> None:
    """New steps with gaps between them (a resume re-logging old steps, then new ones) replace
    exactly those steps; the stored steps between them stay; a step twice in one batch keeps
    its later value."""
    await store.merge_histories("alpha", {"1": points(*range(1, 11))})
    batch = [*points(3, 4, 7, loss=0.5), *points(11, 12, loss=0.25), *points(4, loss=0.125)]
    merged = (await store.merge_histories("alpha", {"1": batch}))["1"]
    assert [p.step for p in merged] == list(range(1, 13))
    loss = {p.step: p.values["loss"] for p in merged}
    assert loss == {**dict.fromkeys(range(1, 13), 1.0), 3: 0.5, 4: 0.125, 7: 0.5, 11: 0.25,
                    12: 0.25}
    assert await store.load_history("alpha", "1") == merged


def test_a_warm_sweep_sends_only_the_points_that_changed() -> None:
    """The sweeper's state keeper knows what each job's window got at the last merge: the same
    points parsed again (new objects, equal fields) are not sent; a changed value, a new step,
    a point whose line moved, or a NaN (never equal to itself) are."""
    from bot.sweep_state import StateKeeper

    keeper = StateKeeper(cast("SweepState", None), set())  # no store is asked here
    first = points(1, 2, 3)
    assert keeper.unmerged("alpha", "7", first) == first  # nothing known yet
    keeper.remember("alpha", "7", first, first)
    assert keeper.unmerged("alpha", "7", points(1, 2, 3)) == []
    changed = [*points(1, 2), *points(3, loss=2.0), *points(4)]
    assert [p.step for p in keeper.unmerged("alpha", "7", changed)] == [3, 4]
    moved = MetricPoint(step=2, values=first[1].values, line_no=9)
    assert keeper.unmerged("alpha", "7", [moved]) == [moved]
    nan = points(1, loss=float("nan"))
    keeper.remember("alpha", "7", nan, nan)
    assert keeper.unmerged("alpha", "7", points(1, loss=float("nan"))) != []
    assert keeper.unmerged("beta", "7", first) == first  # another cluster's job


async def test_unanchored_steps_are_never_merged_into_the_stored_window(
        store: RedisStore) -> None:
    """A cut tail's bar-less HF dicts carry their order only (``steps_unanchored``): a sweep
    whose read restarted from a later tail (a cursor lost, ``/job``'s own read) counts them
    from 1 again. Merged by step, they replaced the stored window's points at those steps
    with newer values (the latest step kept stale metrics, the chart a garbled line): the
    window keeps what it held, and the job is judged on its own points."""
    from datetime import UTC, datetime

    from bot.sweep import Sweeper
    from probes.models import ClusterFacts
    from tests.report.factories import facts, record

    def no_config() -> Config:
        raise AssertionError("no sweep runs here")

    sweeper = Sweeper(no_config, state=store)
    await store.merge_histories("alpha", {"7": points(*range(1, 21))})
    counted = points(*range(1, 6), loss=9.0)
    job = facts(record("sft-x", "7", cluster="alpha"), counted,
                summary_kw={"steps_unanchored": True})
    cluster = ClusterFacts(name="alpha", kind="slurm", status="ok",
                           collected_at=datetime.now(UTC), jobs=(job,))
    histories, degraded = await sweeper._histories((cluster,), None)
    assert degraded is None
    assert histories is not None
    assert [p.values["loss"] for p in histories.get(("alpha", "7"), counted)] == [9.0] * 5
    stored = await store.load_history("alpha", "7")
    assert [p.step for p in stored] == list(range(1, 21))
    assert {p.values["loss"] for p in stored} == {1.0}


async def test_job_chart_of_unanchored_steps_keeps_its_own_points(store: RedisStore) -> None:
    """``/job`` of a job whose steps are only its points' order does not swap in the stored
    window (steps of another read, or of the run before its log was cut)."""
    from types import SimpleNamespace

    from bot.slash_answers import whole_window
    from tests.report.factories import facts, judge, record

    await store.merge_histories("alpha", {"7": points(*range(1, 41))})
    detail = judge(facts(record("sft-x", "7", cluster="alpha"), points(1, 2, loss=9.0),
                         summary_kw={"steps_unanchored": True}))
    assert detail.steps_unanchored
    bot = SimpleNamespace(store=store)  # whole_window reads only the bot's store
    assert await whole_window(bot, detail) is detail  # type: ignore[arg-type]


async def test_a_changed_older_point_is_no_rewind(store: RedisStore) -> None:
    """prime-rl's orchestrator logs ``Step N+1 | ... Reward`` before its trainer logs ``Step N
    | ... Loss`` into the same log (``MetricScan._on_pipe_step`` adds the trainer's to the
    step's point). A sweep between the two lines merged steps 1-3; the next one's only changed
    point was step 2 (the trainer's values added): a merge whose newest point was below the
    window's newest was taken for a rewound run, so step 3, still in the log, was dropped from
    Redis and the window (back at the sweep after, the row's step going 3, 2, 3). The log's
    newest step, not the changed points', tells a rewind (review of 4d043cf)."""
    from pathlib import Path

    from bot.sweep import Sweeper
    from probes.logs.incremental import parse_increment
    from probes.models import ClusterFacts
    from tests.report.factories import facts, record

    def no_config() -> Config:
        raise AssertionError("no sweep runs here")

    sweeper = Sweeper(no_config, state=store)
    log = Path(__file__).parents[1] / "fixtures" / "prime-rl-rebuilt" / "rl_job.log"
    lines = log.read_bytes().splitlines(keepends=True)
    orchestrator = next(i for i, line in enumerate(lines) if b"Step 3 |" in line)
    assert b"Step 2 |" in lines[orchestrator + 1] and b"Loss" in lines[orchestrator + 1]

    async def sweep(points: Sequence[MetricPoint]) -> list[int]:
        from datetime import UTC, datetime

        job = facts(record("rl-x", "7", cluster="alpha"), points)
        cluster = ClusterFacts(name="alpha", kind="slurm", status="ok",
                               collected_at=datetime.now(UTC), jobs=(job,))
        histories, degraded = await sweeper._histories((cluster,), None)
        assert degraded is None and histories is not None
        return [p.step for p in histories["alpha", "7"]]

    first, carry = parse_increment(None, b"".join(lines[:orchestrator + 1]))
    assert await sweep(first.points) == [1, 2, 3]
    trainer, _ = parse_increment(carry, lines[orchestrator + 1])
    assert [p.step for p in trainer.points] == [1, 2, 3]
    assert await sweep(trainer.points) == [1, 2, 3]
    stored = await store.load_history("alpha", "7")
    assert [p.step for p in stored] == [1, 2, 3]
    assert "loss" in stored[1].values and "reward" in stored[1].values


async def test_rewind_is_told_by_the_logs_newest_step(store: RedisStore) -> None:
    """A merge of changed older points under a log whose newest step is the window's drops
    nothing (an eval metric added to an older step, a sparse metric); a log whose newest step
    is below the window's drops the stale steps; Redis and the in-memory window agree."""
    await store.merge_histories("alpha", {"1": points(*range(1, 11))})
    kept = await store.merge_histories("alpha", {"1": points(4, loss=0.5)}, {"1": 10})
    assert [p.step for p in kept["1"]] == list(range(1, 11))
    assert kept["1"][3].values["loss"] == 0.5
    assert kept["1"] == await store.load_history("alpha", "1")
    rewound = await store.merge_histories("alpha", {"1": points(6, loss=9.0)}, {"1": 6})
    assert [p.step for p in rewound["1"]] == list(range(1, 7))
    assert rewound["1"] == await store.load_history("alpha", "1")


async def test_a_rewound_run_in_a_fresh_log_stays_rewound(store: RedisStore) -> None:
    """A run restarted from its checkpoint into a fresh log (a requeue truncating its output, a
    Kubernetes container restarted) logs verl's ``step:21`` on after the old log's
    ``step:31``: its window drops the old run's 21-31 and keeps them dropped at the sweeps
    after (one that sends nothing new, one that adds step 25)."""
    from datetime import UTC, datetime

    from bot.sweep import Sweeper
    from probes.logs.incremental import parse_increment
    from probes.models import ClusterFacts
    from tests.report.factories import facts, record

    def no_config() -> Config:
        raise AssertionError("no sweep runs here")

    def verl(steps: range, entropy: float) -> bytes:
        return "".join(f"step:{s} - actor/entropy:{entropy:.3f} - critic/score/mean:0.500\n"
                       for s in steps).encode()

    sweeper = Sweeper(no_config, state=store)

    async def sweep(points: Sequence[MetricPoint]) -> list[tuple[int, float]]:
        job = facts(record("rl-x", "7", cluster="alpha"), points)
        cluster = ClusterFacts(name="alpha", kind="slurm", status="ok",
                               collected_at=datetime.now(UTC), jobs=(job,))
        histories, degraded = await sweeper._histories((cluster,), None)
        assert degraded is None and histories is not None
        return [(p.step, p.values["entropy"]) for p in histories["alpha", "7"]]

    old, _ = parse_increment(None, verl(range(1, 32), 1.0))
    assert (await sweep(old.points))[-1] == (31, 1.0)
    new, carry = parse_increment(None, verl(range(21, 25), 2.0))
    for summary in (new, parse_increment(carry, b"Training Progress: 24/100\n")[0]):
        window = await sweep(summary.points)
        assert [s for s, _ in window] == list(range(1, 25)) and window[-1] == (24, 2.0)
    later, _ = parse_increment(carry, verl(range(25, 26), 2.0))
    window = await sweep(later.points)
    assert [s for s, _ in window] == list(range(1, 26)) and window[-1] == (25, 2.0)
    assert [(p.step, p.values["entropy"]) for p in
            await store.load_history("alpha", "7")] == window


async def test_a_run_appended_to_its_old_log_reads_its_new_segment(store: RedisStore) -> None:
    """A run restarted into its old log (``--open-mode=append``, a requeue) logs verl's banner
    and ``step:21`` after the old run's ``step:31``, read by the warm (incremental) path: the
    log's summary and the window hold the new run's 21-24 over the old run's 1-20, never the
    old 25-31 (they were shown until the new run logged past them); then one started afresh
    (``step:1``) holds its own steps alone."""
    from datetime import UTC, datetime

    from bot.sweep import Sweeper
    from probes.logs.incremental import parse_increment
    from probes.models import ClusterFacts
    from tests.report.factories import facts, record

    def no_config() -> Config:
        raise AssertionError("no sweep runs here")

    def verl(steps: range, entropy: float) -> bytes:
        return "".join(f"step:{s} - actor/entropy:{entropy:.3f} - critic/score/mean:0.500\n"
                       for s in steps).encode()

    banner = b"Total training steps: 100\n"
    sweeper = Sweeper(no_config, state=store)

    async def sweep(points: Sequence[MetricPoint]) -> list[tuple[int, float]]:
        job = facts(record("rl-x", "7", cluster="alpha"), points)
        cluster = ClusterFacts(name="alpha", kind="slurm", status="ok",
                               collected_at=datetime.now(UTC), jobs=(job,))
        histories, degraded = await sweeper._histories((cluster,), None)
        assert degraded is None and histories is not None
        return [(p.step, p.values["entropy"]) for p in histories["alpha", "7"]]

    old, carry = parse_increment(None, banner + verl(range(1, 32), 1.0))
    assert (await sweep(old.points))[-1] == (31, 1.0)
    resumed, carry = parse_increment(carry, banner + b"Resuming from /ck/global_step_20\n"
                                     + verl(range(21, 25), 2.0))
    assert [p.step for p in resumed.points][-1] == 24
    window = await sweep(resumed.points)
    assert [s for s, _ in window] == list(range(1, 25)) and window[-1] == (24, 2.0)
    assert {e for s, e in window if s > 20} == {2.0}
    afresh, carry = parse_increment(carry, banner + verl(range(1, 4), 3.0))
    assert [p.step for p in afresh.points] == [1, 2, 3]
    window = await sweep(afresh.points)
    assert window == [(1, 3.0), (2, 3.0), (3, 3.0)]
    assert [(p.step, p.values["entropy"]) for p in
            await store.load_history("alpha", "7")] == window
