"""The sweep cache as the bot answers from it (bot.cached, bot.cached_render, bot.offload).

A ``/jobs`` during a sweep whose CPU stage (judging) is stuck in a worker thread is acked and
answered from the cache; concurrent callers share one rendering; the worker process gives the
same answer as a thread and as ``bot.messages.jobs_messages`` on the live sweep; the stamp in
Redis spares re-reading the cache and notices another replica's sweep.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import bot.sweep as sweep_module
from bot import cached_render
from bot.cached import SweepCache
from bot.cached_render import View, jobs_replies
from bot.cli import DEMO_RECORDING
from bot.commands import JobsQuery, job_filter
from bot.config import Config
from bot.config_source import ConfigSource
from bot.home import home_view, publish_home
from bot.messages import jobs_messages, sweep_header
from bot.offload import Offload
from bot.slash_answers import answer_jobs, live_doc
from bot.store import RedisStore, encode_sweep
from bot.sweep import Sweeper
from bot.sweep_result import SweepResult
from bot.telemetry import Telemetry
from probes.config import ReplayCluster
from report.grouping import pending_task_counts
from tests.bot.builders import FakeClock, blocks_text, detail, job, sweep_result
from tests.bot.conftest import Harness, make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack

QUERIES = [JobsQuery(), JobsQuery(bucket="rl"), JobsQuery(mine=True),
           JobsQuery(cluster="alpha"), JobsQuery(bucket="sft", cluster="alpha"),
           JobsQuery(cluster_user="nobody")]


def demo_config(prefix: str, tmp_path: Path) -> Config:
    return make_config(prefix, tmp_path).model_copy(update={"clusters": (
        ReplayCluster(name="alpha", path=str(DEMO_RECORDING)),)})


class HeldJudge:
    """``build_report`` that waits, in its worker thread, until released."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.entered = threading.Event()
        self.release = threading.Event()
        self.hold = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.hold:
            self.entered.set()
            assert self.release.wait(timeout=60), "never released"
        return self.real(*args, **kwargs)


@pytest.fixture
async def replay_bot(slack: FakeSlack, store: RedisStore, clock: FakeClock, prefix: str,
                     tmp_path: Path) -> AsyncIterator[Harness]:
    """The bot with the real Sweeper on the bundled recording."""
    config = demo_config(prefix, tmp_path)
    sweeper = Sweeper(lambda: config, clock=clock)
    async with running_bot(slack, store, sweeper, clock,  # type: ignore[arg-type]
                           config=ConfigSource.fixed(config)) as h:
        yield h
    await sweeper.aclose()


async def test_jobs_during_a_sweep_stuck_in_judging_is_acked_and_answered(
        replay_bot: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep whose judging (CPU, in a worker thread) has not finished: `/jobs` gets its
    HTTP 200 and its answer from the cache meanwhile; the sweep then finishes."""
    h = replay_bot
    judge = HeldJudge(sweep_module.build_report)
    monkeypatch.setattr(sweep_module, "build_report", judge)
    _, first = await h.command("/jobs")
    await h.slack.wait_for(first, 2)  # "Sweeping 1 cluster…" and the tables
    judge.hold = True
    sweeping = asyncio.create_task(live_doc(h.bot))
    assert await asyncio.to_thread(judge.entered.wait, 30)
    status, hook = await h.command("/jobs", "rl")
    assert status == 200
    (reply,) = await h.slack.wait_for(hook)
    assert "cached 0 s ago" in blocks_text(reply.params["blocks"])
    assert "rl-grpo-qwen7b-base" in blocks_text(reply.params["blocks"])
    assert not sweeping.done()  # answered while the sweep's judging was still held
    judge.release.set()
    result, doc = await sweeping
    assert h.bot.cache.doc is doc and len(result.report.jobs) == 19


async def test_concurrent_jobs_share_one_rendering(harness: Harness) -> None:
    """Five `/jobs` at once on a fresh cache: one rendering, five identical answers; a new
    sweep is rendered anew."""
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)
    before = harness.bot.cache.renderings
    hooks = [hook for _, hook in await asyncio.gather(
        *(harness.command("/jobs") for _ in range(5)))]
    answers = [blocks_text((await harness.slack.wait_for(hook))[0].params["blocks"])
               for hook in hooks]
    assert harness.bot.cache.renderings == before  # the first answer's rendering, shared
    assert len(set(answers)) == 1 and "rl-grpo-qwen-7b" in answers[0]
    harness.clock.advance(120)  # the cache is stale: the next /jobs sweeps and renders again
    _, hook = await harness.command("/jobs")
    await harness.slack.wait_for(hook, 2)
    assert harness.bot.cache.renderings == before + 1


async def test_a_query_and_a_bucket_are_rendered_apart(harness: Harness) -> None:
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)
    _, rl = await harness.command("/jobs", "sft")
    (reply,) = await harness.slack.wait_for(rl)
    assert "sft-mistral-7b" in blocks_text(reply.params["blocks"])
    assert "rl-grpo-qwen-7b" not in blocks_text(reply.params["blocks"])


def _array_sweep(at: Any) -> SweepResult:
    running = [detail(job(f"500_{i}", "rl-array-sweep")) for i in (1, 2)]
    pending = detail(job("500", "rl-array-sweep", state="PENDING", step=None))
    sft = detail(job("4300", "sft-mistral-7b", bucket="sft", user="bob"))
    return sweep_result([*running, pending, sft], at=at,
                        labels={("alpha", "500"): {"array_tasks": "3-9"}})


@pytest.mark.parametrize("processes", [True, False])
async def test_the_worker_gives_the_live_answer(processes: bool, tmp_path: Path) -> None:
    """From the cache's text, in the worker process or a thread, each query's messages equal
    ``jobs_messages`` on the live sweep (pending array tasks counted), and so does one job."""
    config = make_config("x:", tmp_path)
    live = _array_sweep(FakeClock()())
    offload = Offload(processes=processes, min_bytes=0)
    try:
        bare = SweepResult(live.report, live.details, (), live.started_at, live.duration_s)
        payload = await offload.run(cached_render.encode, bare, size=1)
        assert payload == encode_sweep(live)
        pending = pending_task_counts(live.facts)
        assert pending  # the array's pending record stands for 7 tasks
        for query in QUERIES:
            keep = job_filter(query, "UALICE", config) if query.filtered else None
            expected = jobs_messages(live, bucket=query.bucket, age_s=3.0, width=100, keep=keep,
                                     what="matching" if query.filtered else None)
            view = View(query=query, invoker="UALICE", config=config, width=100)
            rendered = await offload.run(cached_render.render_view, payload, pending, view,
                                         size=1)
            head = await offload.run(cached_render.head_of, payload, size=1)
            got = jobs_replies(rendered.tables, header=sweep_header(head, age_s=3.0),
                               bucket=query.bucket, limit=5,
                               what="matching" if query.filtered else None)
            assert got == expected, query
        without = await offload.run(cached_render.render_view, payload, {}, View(
            query=JobsQuery(), invoker="", config=config, width=100), size=1)
        assert without != await offload.run(cached_render.render_view, payload, pending, View(
            query=JobsQuery(), invoker="", config=config, width=100), size=1)
        found = await offload.run(cached_render.find_job, payload, None, "4300", size=1)
        assert found == live.details[("alpha", "4300")]
        # encode, two per query, two without/with pending, one job
        assert offload.in_process == (1 + 2 * len(QUERIES) + 2 + 1 if processes else 0)
    finally:
        await offload.aclose()


async def test_a_missing_job_is_the_same_error_from_the_worker(tmp_path: Path) -> None:
    from bot.errors import JobNotFoundError

    live = _array_sweep(FakeClock()())
    offload = Offload(min_bytes=0)
    try:
        payload = encode_sweep(live)
        with pytest.raises(JobNotFoundError, match="no job 999"):
            await offload.run(cached_render.find_job, payload, None, "999", size=1)
    finally:
        await offload.aclose()


def die_in_a_child(parent: int) -> str:
    """Kills the worker process it runs in; in the parent's thread it answers."""
    if os.getpid() != parent:
        os._exit(1)
    return "answered in a thread"


async def test_a_dead_worker_is_replaced_and_its_task_rerun_in_a_thread() -> None:
    offload = Offload(min_bytes=0)
    try:
        assert await offload.run(die_in_a_child, os.getpid(), size=1) == "answered in a thread"
        assert await offload.run(len, "abc", size=1) == 3  # a new worker process
        assert offload.in_process == 1
    finally:
        await offload.aclose()


async def test_the_stamp_spares_reading_the_cache_again(harness: Harness) -> None:
    """While Redis's stamp names the sweep in memory, the 29 MB of a big cache are not
    fetched again; another replica's sweep (a new stamp) is read and answered from."""
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)
    loads: list[int] = []
    load = harness.bot.store.load_stamped_cache

    async def counted() -> tuple[Any, str] | None:
        loads.append(1)
        return await load()

    harness.bot.store.load_stamped_cache = counted  # type: ignore[method-assign]
    _, hook = await harness.command("/jobs")
    await harness.slack.wait_for(hook)
    assert loads == []
    # Another replica sweeps: a new cache and a new stamp.
    replica = SweepCache(store=harness.bot.store, offload=Offload(), telemetry=Telemetry(),
                         clock=harness.clock)
    harness.clock.advance(2)
    newer = sweep_result([detail(job("7777", "rl-other-replica"))], at=harness.clock())
    doc = await replica.publish(newer, ttl_s=60)
    stamp = await harness.bot.store.load_cache_stamp()
    assert stamp["id"] == doc.stamp != harness.bot.cache.doc.stamp  # type: ignore[union-attr]
    _, hook = await harness.command("/jobs")
    (reply,) = await harness.slack.wait_for(hook)
    assert loads == [1]
    assert "rl-other-replica" in blocks_text(reply.params["blocks"])
    assert harness.sweeper.sweeps == 1  # answered from the other replica's cache
    assert harness.bot.cache.doc is not None and harness.bot.cache.doc.stamp == doc.stamp


async def test_jobs_answer_without_a_live_bot_http(harness: Harness) -> None:
    """``answer_jobs`` from the cache needs no sweep: the fake sweeper ran once."""
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)
    sent: list[dict[str, Any]] = []

    async def respond(**kwargs: Any) -> bool:
        sent.append(kwargs)
        return True

    await answer_jobs(harness.bot, JobsQuery(bucket="rl"), respond, "UALICE")
    assert harness.sweeper.sweeps == 1
    assert "rl-grpo-qwen-7b" in blocks_text(sent[0]["blocks"])


async def test_jobs_in_the_channel_decodes_the_cache_only_to_post_its_tables(
        harness: Harness) -> None:
    """`/jobs` in the sweep channel posts the full tables once per sweep, into the day's
    thread; a cached 5,000-job sweep is decoded for that only, not for every `/jobs`."""
    from bot.scheduled import scheduled_sweep

    decodes: list[int] = []
    result = harness.bot.cache.result

    async def counted(doc: Any) -> SweepResult:
        decodes.append(1)
        return await result(doc)

    harness.bot.cache.result = counted  # type: ignore[method-assign]
    _, first = await harness.command("/jobs")  # no thread today yet: nothing to post into
    await harness.slack.wait_for(first, 2)
    _, hook = await harness.command("/jobs")
    await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert decodes == []
    harness.clock.advance(120)
    await scheduled_sweep(harness.bot, 1)  # the day's parent (and its tables) are posted
    threaded = len(harness.slack.to("/api/chat.postMessage"))
    harness.clock.advance(5)
    for _ in range(2):
        _, hook = await harness.command("/jobs")
        await harness.slack.wait_for(hook)
        await harness.bot.tasks.drain()
    assert decodes == []  # this sweep's tables are in the thread already
    assert len(harness.slack.to("/api/chat.postMessage")) == threaded
    replica = SweepCache(store=harness.bot.store, offload=Offload(), telemetry=Telemetry(),
                         clock=harness.clock)
    harness.clock.advance(5)
    await replica.publish(sweep_result([detail(job("7777", "rl-other-replica"))],
                                       at=harness.clock()), ttl_s=60)
    for _ in range(2):
        _, hook = await harness.command("/jobs")
        await harness.slack.wait_for(hook)
        await harness.bot.tasks.drain()
    assert decodes == [1]  # the other replica's sweep: decoded once, to post its tables
    posts = harness.slack.to("/api/chat.postMessage")[threaded:]
    assert posts and all("rl-other-replica" in str(p.params) for p in posts[:1])


@pytest.mark.parametrize("processes", [True, False])
async def test_answers_from_the_worker_process_equal_the_inline_ones(
        harness: Harness, processes: bool) -> None:
    """Every answer from the cache (`/jobs`, a bucket, `/job`, the Home tab) is the same
    whether the worker process or a thread made it: both equal the inline builders'."""
    harness.bot.offload.min_bytes = 0 if processes else 10**12
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)
    live = harness.sweeper.make()  # the fake's sweeps are all alike at one clock time
    expected = jobs_messages(live, bucket="rl", age_s=0.0, width=100)
    _, hook = await harness.command("/jobs", "rl")
    replies = await harness.slack.wait_for(hook, len(expected))
    assert [r.params["blocks"] for r in replies] == [m.blocks for m in expected]
    _, hook = await harness.command("/job", "4242")
    (reply,) = await harness.slack.wait_for(hook)
    assert "rl-grpo-qwen-7b" in blocks_text(reply.params["blocks"])
    assert harness.sweeper.jobs == []  # from the cache, not asked for
    await harness.bot.tasks.drain()
    harness.bot.tasks.spawn(publish_home(harness.bot, "UALICE"), name="home")
    (published,) = await harness.slack.wait_for("/api/views.publish")
    cached = SweepResult(live.report, live.details, (), live.started_at, live.duration_s)
    view = home_view(cached, "UALICE", harness.bot.config.current(), age_s=0.0,
                     episodes=[], now=harness.clock())
    got = published.params["view"]
    assert (json.loads(got) if isinstance(got, str) else got) == view
    assert (harness.bot.offload.in_process > 0) == processes


async def test_a_command_no_listener_can_read_is_refused_before_its_ack(
        harness: Harness) -> None:
    """A slash command without its invoker is refused with a 400 before any listener reads it
    (``bot.payloads``): it was acked, then failed in the listener with a trace."""
    import urllib.parse

    from tests.bot.fake_slack import signed_headers

    body = urllib.parse.urlencode({"command": "/jobs", "text": "", "team_id": "T0FAKE",
                                   "response_url": harness.slack.response_url("broken")})
    status, _ = await harness.post(body, signed_headers(body))  # no user_id: unreadable
    assert status == 400
    assert harness.sweeper.sweeps == 0


async def test_without_a_worker_process_the_stages_run_in_threads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    offload = Offload(min_bytes=0)

    def refused() -> None:
        raise OSError("sem_open: no /dev/shm")

    monkeypatch.setattr(offload, "_executor", refused)
    assert await offload.run(len, "abcd", size=1) == 4
    assert not offload.processes and offload.in_process == 0


async def test_dm_uploads_are_bounded_and_all_sent(harness: Harness) -> None:
    """A burst of cut answers: at most ``UPLOADS_AT_ONCE`` files in flight, each sent."""
    from bot.slash_answers import UPLOADS_AT_ONCE, upload_to_dm

    in_flight, most, sent = 0, 0, []
    release = asyncio.Event()
    real = harness.bot.client.files_upload_v2

    async def held(**kwargs: Any) -> Any:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await release.wait()
        in_flight -= 1
        sent.append(kwargs["content"])
        return await real(**kwargs)

    harness.bot.client.files_upload_v2 = held  # type: ignore[method-assign]
    uploads = [asyncio.create_task(upload_to_dm(
        harness.bot, "UALICE", content=f"answer {i}", filename="jobs.txt", title="t",
        comment="c")) for i in range(10)]
    for _ in range(50):  # every task has had its turns: the rest wait on the bound
        await asyncio.sleep(0)
    assert in_flight == most == UPLOADS_AT_ONCE
    release.set()
    await asyncio.gather(*uploads)
    assert sorted(sent) == sorted(f"answer {i}".encode() for i in range(10))


async def test_two_replicas_caching_at_once_leave_each_sweep_with_its_own_stamp(
        store: RedisStore, prefix: str, redis_server: str) -> None:
    """Two replicas (each its own store on the real Redis) cache sweeps at once, round after
    round, while a third reads: every sweep read carries the stamp its writer gave it, never
    the other replica's, and so does the last one of each round (payload and stamp are
    written as one, and read as one)."""
    clock = FakeClock()
    stores = [make_store(prefix, url=redis_server) for _ in range(3)]
    a, b, reader = (SweepCache(store=s, offload=Offload(processes=False), telemetry=Telemetry(),
                               clock=clock) for s in stores)
    written: dict[str, str] = {}
    seen: list[tuple[str, str]] = []

    async def read_while(writers: list[asyncio.Task[Any]]) -> None:
        while not all(w.done() for w in writers):
            fresh = await reader.fresh(60)
            if fresh is not None:
                seen.append((fresh[0].stamp, fresh[0].payload))

    try:
        for n in range(60):
            writers = [asyncio.create_task(cache.publish(sweep_result(
                [detail(job(str(n * 10 + i), f"rl-replica-{i}")) for i in range(1 + 3 * i)],
                at=clock()), ttl_s=60)) for i, cache in enumerate((a, b))]
            await read_while(writers)
            for w in writers:
                doc = w.result()
                written[doc.stamp] = doc.payload
            last = await SweepCache(store=stores[2], offload=Offload(processes=False),
                                    telemetry=Telemetry(), clock=clock).fresh(60)
            assert last is not None
            seen.append((last[0].stamp, last[0].payload))
            assert written.get(last[0].stamp) == last[0].payload, n
        named = [(stamp, payload) for stamp, payload in seen if stamp in written]
        assert named and all(written[stamp] == payload for stamp, payload in named)
    finally:
        for s in stores:
            await s.aclose()
