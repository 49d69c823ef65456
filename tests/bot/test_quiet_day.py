"""A user keeps the bot unmuted only if what it says is news: measured over simulated days.

Each test runs sweeps every 30 minutes (fake clock) through the real Sweeper, judge, digest,
alerts and notifier, over jobs whose logs are written in their trainers' formats
(``tests/bot/quiet_day.py``), against the fake Slack and the real Redis, and counts the calls
that show a message (posts, thread replies, DMs).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest

from bot.store import RedisStore
from probes.models import JobState
from tests.bot.fake_slack import FakeSlack
from tests.bot.quiet_day import Job, World, hf_log, metrics, quiet_day, trial_tree, verl_log

pytestmark = pytest.mark.redis

START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
STEPS_PER_SWEEP = 10


def rl_world(runs: dict[str, tuple[str, str, Callable[[int], dict[str, float]]]]) -> tuple[
        World, Callable[[], None]]:
    """RL runs (id -> name, user, the metrics' centre at each sweep), 20 steps in at the first
    sweep and ``STEPS_PER_SWEEP`` more at each; returns the world and its ``advance``."""
    world = World(start=START)
    for job_id, (name, user, _) in runs.items():
        world.add(Job(job_id, name, user, started=START - timedelta(hours=1)))
        world.series[job_id] = [metrics(world.rng) for _ in range(20)]

    def render() -> None:
        for job_id in runs:
            world.jobs[job_id].text = verl_log(2000, world.series[job_id][-300:])

    def advance() -> None:
        world.sweep += 1
        for job_id, (_, _, centre) in runs.items():
            world.series[job_id] += [metrics(world.rng, **centre(world.sweep))
                                     for _ in range(STEPS_PER_SWEEP)]
        render()

    render()
    return world, advance


def warning_lines(replies: list[str]) -> list[str]:
    return [line for reply in replies for line in reply.splitlines()
            if line.startswith(("•", "🚨"))]


async def test_a_grad_norm_flapping_around_its_threshold_is_told_once(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """rl-ppo-llama-8b's grad norm sits at ~0.98 (noise ±8%): two steps over 1.0 in a row
    make it a warning on some sweeps and not on others. The parent shows it each time; the
    thread had told 'recovered: was warning' at every other sweep (a warning it never told).
    The first warning is news (the seed: grad norm over 1.0 on two steps has predicted a
    collapse 2-5 steps early), once: each later turn of the same day, either way, is not."""
    world, advance = rl_world({"4101": ("rl-ppo-llama-8b", "alice",
                                        lambda sweep: {"grad_norm": 0.98})})
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()  # the period's parent and its full tables
        baseline = len(day.replies())
        for _ in range(16):
            advance()
            await day.sweep()
    edits = [text for kind, text in day.visible() if kind == "edit"]
    warned = ["warning (rl-ppo-llama-8b)" in text for text in edits]
    assert sum(a and not b for a, b in zip(warned[1:], warned, strict=False)) >= 2, \
        "the warning did not flap: the test tests nothing"
    news = warning_lines(day.replies()[baseline:])
    assert len(news) == 1, news
    assert news[0].startswith("• warning: rl-ppo-llama-8b (alpha:4101) — ")
    assert "grad" in news[0].lower()
    assert day.dms() == []


async def test_a_warning_is_told_once_when_it_begins(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """rl-grpo-qwen-7b's grad norm climbs to ~1.4 at 07:30 and stays there, its entropy
    steady (one collapse signal, not two): a warning from then on, which the seed's 'grad
    norm > 1.0 for >= 2 steps has predicted collapse 2-5 steps early' makes the news a user
    wants while it can still be acted on. It had been told nowhere but the parent's count;
    now one line in the thread when it begins, nothing at the sweeps after."""
    world, advance = rl_world({"4100": ("rl-grpo-qwen-7b", "alice",
                                        lambda sweep: {"grad_norm": 1.4} if sweep >= 3
                                        else {})})
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for _ in range(8):
            advance()
            await day.sweep()
    edits = [text for kind, text in day.visible() if kind == "edit"]
    assert all("warning (rl-grpo-qwen-7b)" in text for text in edits[2:]), edits
    replies = day.replies()[baseline:]
    assert len(replies) == 1, replies
    [line] = warning_lines(replies)
    assert line.startswith("• warning: rl-grpo-qwen-7b (alpha:4100) — "), line
    assert "Changes since 07:00Z (as of 07:30Z)" in replies[0]
    assert "rl-grpo-qwen-7b" in replies[0].split("```")[1], "no row for the warned run"
    assert day.dms() == []


def collapsing_from(start: int, end: int) -> Callable[[int], dict[str, float]]:
    """A run whose grad norm jumps to ~3 and entropy halves at sweep ``start``, through
    ``end``, then calms down (nobody pressed a button)."""
    return lambda sweep: ({"grad_norm": 3.0, "entropy": 0.3, "score": 0.1}
                          if start <= sweep <= end else {})


async def test_a_collapse_read_as_a_warning_after_is_one_episode(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """rl-dapo-qwen-14b collapses at 08:00 and stays broken for four hours: once its window
    is all high grad norms the entropy test no longer fires and it reads 'warning' (grad norm
    over 1.0 on consecutive steps), then healthy when it calms. That is one collapse DM, one
    collapse line and one recovery line, the recovery naming the collapse (it read 'recovered:
    was warning', a warning the thread never told)."""
    world, advance = rl_world({"4102": ("rl-dapo-qwen-14b", "bob", collapsing_from(4, 12))})
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for _ in range(18):
            advance()
            await day.sweep()
    edits = [text for kind, text in day.visible() if kind == "edit"]
    assert any("warning (rl-dapo-qwen-14b)" in text for text in edits), "never read warning"
    assert len(day.dms()) == 1 and "Collapse on" in day.dms()[0]
    news = [line for reply in day.replies()[baseline:] for line in reply.splitlines()
            if line.startswith(("•", "🚨"))]
    assert news == [
        "🚨 collapse on `alpha:4102` rl-dapo-qwen-14b, owner `bob` told by DM",
        "• recovered: rl-dapo-qwen-14b (alpha:4102) — was collapse",
    ]


def sft_chain(ids: tuple[str, ...], walltime_sweeps: int) -> tuple[World, Callable[[], None]]:
    """An SFT cell run as a restart chain (``sbatch --dependency=afterany:PREV``): each link
    runs ``walltime_sweeps`` sweeps, ends TIMEOUT at its walltime, and the next resumes from
    its checkpoint; HF Trainer logs, 60 steps a sweep. The last link queues no successor: the
    chain breaks at its TIMEOUT."""
    world = World(start=START)
    losses = [(1.8 - 0.002 * i, 0.8) for i in range(100)]

    def link(k: int, state: JobState, started: datetime | None) -> Job:
        return Job(ids[k], "sft-grid-lr1e5", "bob", state=state, started=started,
                   time_limit_s=walltime_sweeps * 1800,
                   dependency=None if state is not JobState.PENDING
                   else f"afterany:{ids[k - 1]}")

    world.add(link(0, JobState.RUNNING, START - timedelta(minutes=30)))
    world.add(link(1, JobState.PENDING, None))

    def render() -> None:
        from tests.bot.quiet_day import hf_log

        for job in world.jobs.values():
            if job.state is not JobState.PENDING:
                job.text = hf_log(3000, losses[-400:]) if job.ended is None else job.text

    def advance() -> None:
        world.sweep += 1
        now = world.now()
        losses.extend((losses[-1][0] - 0.002 + world.rng.gauss(0, 0.01),
                       0.8 + world.rng.gauss(0, 0.05)) for _ in range(60))
        k = world.sweep // walltime_sweeps
        if world.sweep % walltime_sweeps == 0 and k < len(ids):
            ended = world.jobs[ids[k - 1]]
            ended.state, ended.ended = JobState.TIMEOUT, now
            nxt = world.jobs[ids[k]]
            nxt.state, nxt.started, nxt.dependency = JobState.RUNNING, now, None
            if k + 1 < len(ids):
                world.add(link(k + 1, JobState.PENDING, None))
        elif world.sweep == walltime_sweeps * len(ids):
            last = world.jobs[ids[-1]]
            last.state, last.ended = JobState.TIMEOUT, now
        render()

    render()
    return world, advance


async def test_a_restart_chain_s_walltime_timeouts_are_no_replies(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """An SFT cell chained over four 4-hour links restarts three times in a day: each TIMEOUT
    with its afterany successor queued is the chain working (the seed: normal, not a failure).
    The parent counts them; each had been a thread reply of its own with the cell's row (one
    every four hours per cell: 48 a day for a grid of eight). When the last link times out
    with no successor the chain is broken: that is told at once, in the thread and by DM."""
    ids = ("4300", "4310", "4320", "4330")
    world, advance = sft_chain(ids, 8)
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for _ in range(8 * len(ids) - 1):
            advance()
            await day.sweep()
        assert day.replies()[baseline:] == [], "a chain restart made a reply"
        assert day.dms() == []
        advance()  # 4330 times out, nothing queued after it
        await day.sweep()
    [reply] = day.replies()[baseline:]
    assert "`alpha:4330` sft-grid-lr1e5 failed: walltime TIMEOUT with no afterany" in reply
    [dm] = day.dms()
    assert "alpha:4330" in dm


def two_runs() -> tuple[World, Callable[[], None]]:
    return rl_world({"4100": ("rl-grpo-qwen-7b", "alice", lambda sweep: {}),
                     "4103": ("rl-grpo-llama-70b", "bob", lambda sweep: {})})


async def test_a_one_sweep_ssh_blip_keeps_the_parent_honest_and_the_thread_quiet(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """alpha's login node refuses SSH at 08:00 (and at the retry a minute later), and answers
    at 08:30. Nothing about the runs changed: the thread says nothing, either way. The parent
    edited at 08:00 had read '0 jobs' and 'No active or recent jobs.' beside the warning, as
    if both runs had gone; it now says alpha's 2 jobs as last read (07:30Z) were not read,
    and that its count is of the jobs read."""
    world, advance = two_runs()
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for sweep in range(1, 7):
            advance()
            world.unreachable = sweep == 4
            await day.sweep()
    assert day.replies()[baseline:] == []
    assert day.dms() == []
    blip = [text for kind, text in day.visible() if kind == "edit" and "UNREACHABLE" in text]
    assert len(blip) == 2  # the 08:00 sweep and its retry
    for text in blip:
        assert "No active or recent jobs" not in text and "— 0 jobs read" in text
        assert "alpha UNREACHABLE" in text and "2 jobs as of 07:30Z not read" in text


async def test_a_cluster_down_for_an_hour_is_one_line_and_its_return_one_line(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """alpha unreachable from 08:00 to 09:30 (four sweeps and their retries): its runs are not
    watched meanwhile, which the thread says once, when the second sweep finds it still down,
    and once more when it answers again; no table, and nothing at the sweeps between."""
    world, advance = two_runs()
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for sweep in range(1, 9):
            advance()
            world.unreachable = 4 <= sweep <= 7
            await day.sweep()
    replies = day.replies()[baseline:]
    assert len(replies) == 2, replies
    down, back = replies
    assert "cluster `alpha` unreachable since 08:00Z" in down and "```" not in down
    assert "cluster `alpha` answers again (unreachable from 08:00Z to 10:00Z)" in back
    assert "```" not in back


async def test_an_eval_whose_results_trickle_is_told_stalled_once(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """A hard long-horizon eval lands a result.json every two hours: 60 minutes without one
    reads 'stalled', and the next result 'recovered', by turns. Its first stall and the
    recovery after it are news; every later turn of the same day had been a thread reply too
    (7 in eight hours; the owner's DM was already sent once a day). A stall after the quiet
    hours is told again."""
    from tests.bot.quiet_day import trial_tree

    world = World(start=START)
    world.add(Job("4501", "eval-qwen7b-terminalbench", "alice",
                  started=START - timedelta(hours=2)))

    def render() -> None:
        landed = (world.sweep // 4) * 4  # a result every two hours
        world.jobs["4501"].trials = trial_tree(
            40 + world.sweep // 4, 300, world.now(), rng=world.rng,
            newest=world.start + timedelta(minutes=30 * landed))
        world.jobs["4501"].text = "harbor run\n"

    async with quiet_day(slack, store, world, tmp_path) as day:
        render()
        await day.sweep()
        baseline = len(day.replies())
        for _ in range(15):
            world.sweep += 1
            render()
            await day.sweep()
        news = [line for reply in day.replies()[baseline:] for line in reply.splitlines()
                if line.startswith("•")]
        assert news == [
            "• stalled: eval-qwen7b-terminalbench (alpha:4501) — STALL: no new result.json "
            "for 1h30m",
            "• recovered: eval-qwen7b-terminalbench (alpha:4501) — was stalled",
        ]
        assert len(day.dms()) == 1
        world.start += timedelta(hours=24)  # the next day: a stall is news again
        told = len(day.replies())
        for _ in range(4):
            world.sweep += 1
            render()
            await day.sweep()
    assert any("• stalled: eval-qwen7b-terminalbench" in reply
               for reply in day.replies()[told:])


@pytest.mark.parametrize("kept", ["garbage", "2026-12-04T00:00:00", 42])
async def test_a_malformed_stall_told_mark_is_no_mark(store: RedisStore, kept: object) -> None:
    """A ``digest:told:stalled`` mark that is no aware ISO time (by hand, an older bot, cut)
    neither silences the stall nor raises out of the digest: the stall is told, the mark
    rewritten."""
    from bot.repeats import quiet_repeats
    from report.changes import Change

    stall = Change(kind="stalled", cluster="alpha", job_id="4501", name="eval-x",
                   state=JobState.RUNNING, verdict="stalled", why="STALL")
    await store.put_doc("digest:told:stalled:alpha:4501", {"at": kept}, ttl_s=3600)
    assert await quiet_repeats(store, [stall], {}, lambda: START) == [stall]
    doc = await store.get_doc("digest:told:stalled:alpha:4501")
    assert isinstance(doc, dict) and doc["at"] == START.isoformat()


async def test_a_run_collapsing_by_turns_is_told_once_while_its_alert_stands(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """rl-dapo-qwen-14b collapses at 07:30, reads healthy at 08:00, collapses again at 09:00
    (a spike-mitigation run, or one nobody has answered yet): its owner has the alert with
    its buttons (no second DM: the episode is open); the thread tells the collapse and the
    recovery, not each later turn of the same day ('collapsed' and 'recovered' again)."""
    bad = {3, 6}
    world, advance = rl_world({"4102": (
        "rl-dapo-qwen-14b", "bob",
        lambda sweep: {"grad_norm": 3.0, "entropy": 0.3} if sweep in bad else {})})
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for _ in range(9):
            advance()
            await day.sweep()
    edits = [text for kind, text in day.visible() if kind == "edit"]
    assert sum("COLLAPSE (rl-dapo-qwen-14b)" in text for text in edits) == 2, "no second turn"
    assert len(day.dms()) == 1
    news = [line for reply in day.replies()[baseline:] for line in reply.splitlines()
            if line.startswith(("•", "🚨"))]
    assert news == [
        "🚨 collapse on `alpha:4102` rl-dapo-qwen-14b, owner `bob` told by DM",
        "• recovered: rl-dapo-qwen-14b (alpha:4102) — was collapse",
    ]


async def test_a_collapse_its_own_alert_tells_again_keeps_its_recovery(
        store: RedisStore) -> None:
    """A second collapse within the quiet hours that a new alert tells (its first episode was
    answered, so a new one opened) is told, and so is the recovery after it."""
    from bot.repeats import quiet_repeats
    from report.changes import Change, Snapshot

    def change(kind: str) -> Change:
        return Change(kind=kind, cluster="alpha", job_id="4102",  # type: ignore[arg-type]
                      name="rl-x", state=JobState.RUNNING, verdict="collapse", why="w")

    key = ("alpha", "4102")
    collapsed = Snapshot(state=JobState.RUNNING, verdict="collapse")
    healthy = Snapshot(state=JobState.RUNNING, verdict="healthy")
    now = START
    assert await quiet_repeats(store, [change("collapsed")], {key: healthy}, lambda: now)
    now += timedelta(hours=1)
    assert await quiet_repeats(store, [change("recovered")], {key: collapsed}, lambda: now)
    now += timedelta(hours=1)
    assert not await quiet_repeats(store, [change("collapsed")], {key: healthy}, lambda: now)
    assert not await quiet_repeats(store, [change("recovered")], {key: collapsed},
                                   lambda: now)
    assert await quiet_repeats(store, [change("collapsed")], {key: healthy}, lambda: now,
                               told={key})
    assert await quiet_repeats(store, [change("recovered")], {key: collapsed}, lambda: now)


async def test_an_array_s_waves_are_no_replies_until_it_is_done(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """A 16-task datagen array throttled to 4 at a time (``--array=0-15%4``), each task an
    hour of Harbor trials: every hour a wave finishes and the next starts. Each wave had been
    a reply ('finished ×4 ... started ×4', 3 in the morning) though the array is one run
    going as planned; the parent shows its progress. Its first start is news (the array
    started), and its end (all 16 done, with the cleanup it needs: one line, one DM)."""
    from tests.bot.quiet_day import trial_tree

    world = World(start=START)
    width = 4
    for i in range(16):
        state = JobState.RUNNING if i < width else JobState.PENDING
        world.add(Job(f"8800_{i}", "datagen-swe-shards", "carol", state=state,
                      started=START - timedelta(minutes=20) if i < width else None))

    def render() -> None:
        for job in world.jobs.values():
            if job.started is not None:
                minutes = ((job.ended or world.now()) - job.started).total_seconds() / 60
                job.trials = trial_tree(min(50, int(minutes)), 50, world.now(),
                                        rng=world.rng)
                job.text = "harbor run\n"

    def advance() -> None:
        world.sweep += 1
        now = world.now()
        for job in world.jobs.values():
            if job.started and not job.ended and now - job.started >= timedelta(hours=1):
                job.state, job.ended = JobState.COMPLETED, now
        free = width - sum(j.state is JobState.RUNNING for j in world.jobs.values())
        for job in [j for j in world.jobs.values() if j.state is JobState.PENDING][:free]:
            job.state, job.started = JobState.RUNNING, now
        render()

    render()
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for _ in range(9):
            advance()
            await day.sweep()
    [reply] = day.replies()[baseline:]
    assert "datagen-swe-shards ×16" in reply and "datagen-job-cleanup" in reply
    assert [dm.splitlines()[0] for dm in day.dms()] == [
        "✅ *datagen-swe-shards* `alpha:8800_12` (×16 tasks) completed."]


class BusyDay:
    """A day on alpha, 48 sweeps from 06:00: RL runs advancing ten noisy steps a sweep (one
    healthy, one with its grad norm hovering at 1.0, one collapsing from 13:00 to 17:00, one
    dying of a CUDA OOM at 21:00), an SFT cell chained over 4-hour walltimes and another
    completing at 21:00, a datagen run whose chunks finish until 22:00, an eval climbing
    slowly and one whose results stop at 22:30, a log fetch failing at 16:00 and the whole
    cluster unreachable at 19:00."""

    RL: ClassVar[dict[str, tuple[str, str]]] = {
        "4100": ("rl-grpo-qwen-7b", "alice"), "4101": ("rl-ppo-llama-8b", "alice"),
        "4102": ("rl-dapo-qwen-14b", "bob"), "4103": ("rl-grpo-llama-70b", "bob")}
    CHAIN = ("4300", "4310", "4320", "4330")
    OOM = ("Traceback (most recent call last):",
           '  File "/w/verl/verl/trainer/main_ppo.py", line 64, in main',
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")

    def __init__(self) -> None:
        self.world = world = World(start=START)
        began = START - timedelta(hours=2)
        for job_id, (name, user) in self.RL.items():
            world.add(Job(job_id, name, user, started=began))
            world.series[job_id] = [metrics(world.rng) for _ in range(20)]
        world.add(Job("4300", "sft-grid-lr1e5", "bob", started=began, time_limit_s=4 * 3600))
        world.add(Job("4310", "sft-grid-lr1e5", "bob", state=JobState.PENDING,
                      dependency="afterany:4300", time_limit_s=4 * 3600))
        world.add(Job("4301", "sft-grid-lr3e5", "bob", started=began))
        world.sft = {"lr1e5": [(1.8 - 0.002 * i, 0.8) for i in range(100)],
                     "lr3e5": [(1.7 - 0.002 * i, 0.7) for i in range(100)]}
        for job_id, name in (("4400", "datagen-swe-shards"), ("4500", "eval-qwen7b-swebench"),
                             ("4501", "eval-qwen7b-terminalbench")):
            world.add(Job(job_id, name, "carol" if job_id == "4400" else "alice",
                          started=began))
        self.render()

    def centre(self, job_id: str) -> dict[str, float]:
        if job_id == "4101":
            return {"grad_norm": 0.98}
        if job_id == "4102" and 14 <= self.world.sweep <= 22:
            return {"grad_norm": 3.0, "entropy": 0.3, "score": 0.1}
        return {}

    def advance(self) -> None:
        world = self.world
        world.sweep += 1
        sweep, now = world.sweep, world.now()
        for job_id in self.RL:
            if world.jobs[job_id].state is JobState.RUNNING:
                world.series[job_id] += [metrics(world.rng, **self.centre(job_id))
                                         for _ in range(STEPS_PER_SWEEP)]
        world.jobs["4100"].fetch_error = sweep == 20
        world.unreachable = sweep == 26
        link = sweep // 8
        if sweep % 8 == 4 and link + 1 < len(self.CHAIN):
            ended, nxt = world.jobs[self.CHAIN[link]], world.jobs[self.CHAIN[link + 1]]
            ended.state, ended.ended = JobState.TIMEOUT, now
            nxt.state, nxt.started, nxt.dependency = JobState.RUNNING, now, None
            if link + 2 < len(self.CHAIN):
                world.add(Job(self.CHAIN[link + 2], "sft-grid-lr1e5", "bob",
                              state=JobState.PENDING, time_limit_s=4 * 3600,
                              dependency=f"afterany:{nxt.job_id}"))
        for cell, job_id in (("lr1e5", None), ("lr3e5", "4301")):
            if job_id is None or world.jobs[job_id].state is JobState.RUNNING:
                last = world.sft[cell][-1][0]
                world.sft[cell] += [(last - 0.002 + world.rng.gauss(0, 0.01),
                                     0.8 + world.rng.gauss(0, 0.05)) for _ in range(60)]
        if sweep == 30:  # the 70b run dies; lr3e5 reaches its 1900 steps
            for job_id, state in (("4103", JobState.FAILED), ("4301", JobState.COMPLETED)):
                world.jobs[job_id].state, world.jobs[job_id].ended = state, now
        self.render()

    def render(self) -> None:
        world, sweep, now = self.world, self.world.sweep, self.world.now()
        for job_id in self.RL:
            job = world.jobs[job_id]
            job.text = verl_log(2000, world.series[job_id][-300:])
            if job.state is JobState.FAILED:
                job.text += "".join(f"(TaskRunnerV1 pid=247607) {line}\n" for line in self.OOM)
        for cell, total in (("lr1e5", 3000), ("lr3e5", 1900)):
            series = world.sft[cell]
            text = hf_log(total, series[-400:], first=max(1, len(series) - 399))
            for job in world.jobs.values():
                if job.name == f"sft-grid-{cell}" and job.state is not JobState.PENDING \
                        and (job.ended is None or job.ended == now):
                    job.text = text
        chunks = min(20, 4 + sweep // 2)
        datagen = world.jobs["4400"]
        datagen.trials = trial_tree(min(2000, 400 + 35 * sweep), 2000, now, rng=world.rng,
                                    chunks=(chunks, 20))
        datagen.text = "".join(f"chunk {i} uploaded\n" for i in range(chunks))
        if chunks == 20 and datagen.state is JobState.RUNNING:
            datagen.state, datagen.ended = JobState.COMPLETED, now
        world.jobs["4500"].trials = trial_tree(60 + 3 * sweep, 500, now, rng=world.rng)
        landed = START + timedelta(minutes=30 * min(sweep, 33))
        world.jobs["4501"].trials = trial_tree(40 + 4 * min(sweep, 33), 300, now,
                                               rng=world.rng, newest=landed)
        for job_id in ("4500", "4501"):
            world.jobs[job_id].text = "harbor run\n"


async def test_a_busy_day_says_each_piece_of_news_once(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """48 sweeps of :class:`BusyDay`: the thread's replies are the full tables at each
    period's start and one line per piece of news (the hovering grad norm's first warning,
    the collapse, its recovery, the OOM failure, the SFT cell and the datagen run done with
    their cleanups, the eval's stall; nothing for the grad norm's later turns, the chain
    restarts, the fetch and SSH blips);
    the DMs are the collapse alert and the owners' job ends. Before this suite, the same day
    was 19 replies: 11 'recovered — was warning' for the hovering grad norm, 3 chain
    restarts, the collapse's recovery as 'was warning'."""
    day_ = BusyDay()
    async with quiet_day(slack, store, day_.world, tmp_path) as day:
        for sweep in range(48):
            if sweep:
                day_.advance()
            await day.sweep()
    replies = day.replies()
    tables = [r for r in replies if r.startswith("Full tables as of")]
    assert [t.splitlines()[0] for t in tables] == ["Full tables as of 06:00Z",
                                                   "Full tables as of 00:00Z"]
    assert len(replies) == len(tables) + 5, "a change told apart from the day's tables"
    news = [line for r in replies for line in r.split("```")[0].splitlines()
            if line.startswith(("•", "🚨", "🔥", "✅", "⚠️"))]
    expected = [
        "• warning: rl-ppo-llama-8b (alpha:4101) — grad_norm &gt;1.0 on steps",
        "🚨 collapse on `alpha:4102` rl-dapo-qwen-14b",
        "• recovered: rl-dapo-qwen-14b (alpha:4102) — was collapse",
        "🔥 `alpha:4103` rl-grpo-llama-70b failed: oom: torch.OutOfMemoryError: CUDA out of "
        "memory",
        "✅ `alpha:4301` sft-grid-lr3e5 completed: sft-job-cleanup",
        "✅ `alpha:4400` datagen-swe-shards completed: datagen-job-cleanup",
        "• stalled: eval-qwen7b-terminalbench (alpha:4501)",
    ]
    assert len(news) == len(expected), news
    for line, start in zip(news, expected, strict=True):
        assert line.startswith(start), (line, start)
    dms = day.dms()
    assert [dm.splitlines()[0] for dm in dms] == [
        "*Collapse on* `alpha:4102` *rl-dapo-qwen-14b* (owner bob)",
        "❌ *rl-grpo-llama-70b* `alpha:4103` ended FAILED.",  # bob's ends of 21:00: one DM
        "✅ *datagen-swe-shards* `alpha:4400` completed.",
        "⏸ *eval-qwen7b-terminalbench* `alpha:4501` is stalled.",
    ]
    assert "✅ *sft-grid-lr3e5* `alpha:4301` completed." in dms[1]
    assert "sft-job-cleanup" in dms[1]


async def test_an_outage_s_line_quotes_the_cluster_s_words_inert(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """The outage line quotes the probe's reason, which may carry the login node's own words
    (a banner, an error): no mention, no link, no code span broken out of."""
    world, advance = two_runs()
    world.unreachable_detail = "ssh: banner <!channel> <https://x.example|login> & `rm` *x*"
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        for sweep in range(1, 4):
            advance()
            world.unreachable = sweep >= 2
            await day.sweep()
    down = [text for kind, text in day.visible() if "unreachable since" in text]
    assert len(down) == 1
    assert "<!channel>" not in down[0] and "<https" not in down[0]
    assert "&lt;!channel&gt;" in down[0] and "&amp;" in down[0]
    assert down[0].count("`") % 2 == 0
    edits = [text for kind, text in day.visible() if kind == "edit" and "UNREACHABLE" in text]
    assert edits and not any("<!channel>" in text or "<https" in text for text in edits)


async def test_a_day_opened_while_its_cluster_is_down_gets_its_tables_when_it_answers(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """alpha's login node refuses SSH at midnight, the sweep that opens the new day's parent
    (and at its retry): that day's full tables, posted once, had been an empty 'Full tables
    as of 00:00Z'. They now wait for the next sweep that reads the cluster (00:30), once."""
    world, advance = two_runs()
    world.start = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    async with quiet_day(slack, store, world, tmp_path) as day:
        for sweep in range(5):  # 23:00, 23:30, 00:00 (down), 00:30, 01:00
            if sweep:
                advance()
            world.unreachable = sweep == 2
            await day.sweep()
    tables = [text for text in day.replies() if text.startswith("Full tables")]
    assert [t.splitlines()[0] for t in tables] == ["Full tables as of 23:00Z",
                                                   "Full tables as of 00:30Z"]
    assert "rl-grpo-qwen-7b" in tables[1] and "rl-grpo-llama-70b" in tables[1]


async def test_a_requeued_run_starting_again_is_no_reply_of_its_own(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """A run on a preemptible partition is preempted and requeued twice (pending at 07:30
    and 09:00, running again half an hour later): each requeue is news ('restarted', it lost
    the steps since its checkpoint), its start again is the requeue working and had been a
    reply of its own ('started: running'), two replies a preemption."""
    world, advance = rl_world({"4100": ("rl-grpo-qwen-7b", "alice", lambda sweep: {})})
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for sweep in range(1, 10):
            advance()
            job = world.jobs["4100"]
            if sweep in (3, 6):
                job.state = JobState.PENDING
            elif sweep in (4, 7):
                job.state, job.started = JobState.RUNNING, world.now() - timedelta(minutes=10)
            await day.sweep()
    news = [line.split(" — ")[0] for reply in day.replies()[baseline:]
            for line in reply.splitlines() if line.startswith("•")]
    assert news == ["• restarted: rl-grpo-qwen-7b (alpha:4100)"] * 2


async def test_plain_jobs_starting_are_no_replies_of_their_own(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """A busy cluster starts dozens of jobs a day: four queued runs start at 07:00, 08:00,
    09:00 and 10:00, each had been a thread reply of its own ('started: running'). A start is
    the queue working: the parent counts it, and it is listed in a reply that goes out anyway
    (here the 10:00 start beside a run failing), never a reply alone."""
    world, advance = two_runs()
    queued = {2: "4200", 4: "4201", 6: "4202", 8: "4203"}
    for job_id in queued.values():
        world.add(Job(job_id, f"sft-queued-{job_id}", "carol", state=JobState.PENDING))
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for sweep in range(1, 9):
            advance()
            if sweep in queued:
                job = world.jobs[queued[sweep]]
                job.state, job.started = JobState.RUNNING, world.now() - timedelta(minutes=5)
                job.text = hf_log(1000, [(1.5, 0.7)] * 3)
            if sweep == 8:
                failed = world.jobs["4103"]
                failed.state, failed.ended = JobState.FAILED, world.now()
            await day.sweep()
    replies = day.replies()[baseline:]
    assert len(replies) == 1, replies
    assert "rl-grpo-llama-70b failed" in replies[0]
    assert "• started: sft-queued-4203 (alpha:4203)" in replies[0]
    assert not any("sft-queued-420" + k in replies[0] for k in "012")


async def test_a_job_restarting_sweep_after_sweep_is_told_once_per_episode(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """rl-grpo-qwen-7b's attempts keep failing and being retried from 07:00 to 09:00 (its
    scheduler's restart count rises at five sweeps in a row), then it runs clean, and at 12:00
    it restarts once more. Each sweep of the first episode had been a reply ('restarted: N
    restarts since the last sweep'): that is one line when it starts, and one for the later
    restart (a new episode), nothing between."""
    world, advance = two_runs()
    rising = {2, 3, 4, 5, 6, 12}
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for sweep in range(1, 14):
            advance()
            if sweep in rising:
                world.jobs["4100"].restarts += 2
            await day.sweep()
    news = [line for reply in day.replies()[baseline:] for line in reply.splitlines()
            if line.startswith("•")]
    assert news == ["• restarted: rl-grpo-qwen-7b (alpha:4100) — 2 restarts since the last "
                    "sweep; running again"] * 2


async def test_a_log_unreadable_for_an_hour_is_one_line_and_its_return_one_line(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """rl-grpo-qwen-7b's log cannot be fetched at 06:30 and 07:00 (a blip: nothing said),
    then from 08:00 to 10:00 (five sweeps and their retries). The row read 'unknown' in the
    parent and the thread never said its run was not being judged; now one line when it has
    been unreadable across three scheduled sweeps (09:00), one when it reads again (10:30),
    no table, nothing between."""
    world, advance = two_runs()
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        baseline = len(day.replies())
        for sweep in range(1, 11):
            advance()
            world.jobs["4100"].fetch_error = sweep in (1, 2) or 4 <= sweep <= 8
            await day.sweep()
    replies = day.replies()[baseline:]
    assert len(replies) == 2, replies
    gone, back = replies
    assert "`alpha:4100` rl-grpo-qwen-7b: log unreadable since 08:00Z" in gone, gone
    assert "```" not in gone
    assert "`alpha:4100` rl-grpo-qwen-7b: log read again (unreadable from 08:00Z to " \
        "10:30Z)" in back, back
    assert "```" not in back
    assert day.dms() == []


async def test_a_period_s_first_sweep_tells_its_changes_with_its_tables(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """rl-grpo-llama-70b dies of a CUDA OOM between 23:30 and midnight, the sweep that opens
    the new day's parent: its failure had been a reply of its own right after the day's full
    tables (the run's row in both), two replies where one says it all. The tables' reply now
    carries the change lines above them; nothing is lost (both rows, the diagnosis line)."""
    world, advance = two_runs()
    world.start = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()  # 23:00
        advance()
        await day.sweep()  # 23:30
        told = len(day.replies())
        advance()
        failed = world.jobs["4103"]
        failed.state, failed.ended = JobState.FAILED, world.now()
        failed.text += "".join(f"(TaskRunnerV1 pid=247607) {line}\n" for line in BusyDay.OOM)
        await day.sweep()  # 00:00: the new day's parent
    replies = day.replies()[told:]
    assert len(replies) == 1, replies
    [reply] = replies
    head = reply.split("```")[0]
    assert head.startswith("Full tables as of 00:00Z\n"), head
    assert "Changes since 23:30Z" in head
    assert "🔥 `alpha:4103` rl-grpo-llama-70b failed: oom: torch.OutOfMemoryError" in head
    assert "rl-grpo-qwen-7b" in reply and "rl-grpo-llama-70b [FAILED]" in reply
    assert [dm.splitlines()[0] for dm in day.dms()] == [
        "❌ *rl-grpo-llama-70b* `alpha:4103` ended FAILED."]


async def test_a_failure_s_advice_reads_in_a_user_s_words(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """rl-grpo-llama-70b dies of a CUDA OOM: the thread's failure line and bob's DM had told
    him to 'note it in a dated agent_logs/ entry', the rulebook's own directory for its agent,
    which is no place of his. Now what to do reads in plain words, as the bot's incident file
    (named in the thread's line) is called."""
    world, advance = two_runs()
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        advance()
        failed = world.jobs["4103"]
        failed.state, failed.ended = JobState.FAILED, world.now()
        failed.text += "".join(f"(TaskRunnerV1 pid=247607) {line}\n" for line in BusyDay.OOM)
        await day.sweep()
    shown = [text for _, text in day.visible()]
    assert not any("agent_logs" in text for text in shown), shown
    [line] = [line for reply in day.replies() for line in reply.splitlines()
              if line.startswith("🔥")]
    assert "; find the cause before resubmitting, and record it in a dated incident note · " \
        "`" in line, line
    [dm] = day.dms()
    assert dm.splitlines()[0] == "❌ *rl-grpo-llama-70b* `alpha:4103` ended FAILED."
    assert "find the cause before resubmitting, and record it in a dated incident note" in dm


async def test_a_job_whose_output_goes_to_dev_null_is_no_unreadable_log(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """carol's checkpoint upload runs ``sbatch -o /dev/null`` (as jobtables sweep reads one on
    the real SLURM: log-missing, 'No log found (/dev/null)', verdict unknown). At the third
    sweep the thread said 'log unreadable since 06:00Z: its run is not being judged', as for
    a log an outage took away, whose return it would tell: this one never was and never will
    be, by its owner's choice. The parent names it unknown, the tables say why; the thread
    says nothing of it. A log that does go unreadable is still told."""
    world, advance = two_runs()
    world.add(Job("4700", "upload-ckpt-qwen7b", "carol", started=START - timedelta(minutes=10),
                  discarded=True))
    async with quiet_day(slack, store, world, tmp_path) as day:
        await day.sweep()
        [tables] = day.replies()
        assert "No log found (/dev/null)" in tables
        for sweep in range(1, 9):
            advance()
            world.jobs["4100"].fetch_error = sweep >= 4
            await day.sweep()
    edits = [text for kind, text in day.visible() if kind == "edit"]
    assert all("unknown (upload-ckpt-qwen7b" in text for text in edits)
    replies = day.replies()[1:]
    assert not any("upload-ckpt-qwen7b" in reply for reply in replies), replies
    [told] = replies
    assert "`alpha:4100` rl-grpo-qwen-7b: log unreadable since 08:00Z" in told
