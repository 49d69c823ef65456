"""Job-end DMs to the owner after scheduled sweeps, and `/jobs notify off|on` kept in Redis."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.alert_messages import DM_TEXT_MAX, NOTIFY_FOOTER, job_end_dm, job_end_dms
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from probes.models import JobState
from report.changes import Change
from report.models import JobDetail, Recommendation
from tests.bot.builders import FakeClock, FakeSweeper, detail, job
from tests.bot.builders import sweep_result as build_result
from tests.bot.conftest import Harness, make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis

TRACEBACK = ('traceback: RuntimeError: CUDA error: an illegal memory access was encountered '
             '(rank 3, first real traceback above the elastic summary)')


def ended(d: JobDetail, state: JobState, **fields: object) -> JobDetail:
    report = d.report.model_copy(update={"state": state, **fields})
    return d.model_copy(update={"report": report})


def failed(d: JobDetail) -> JobDetail:
    out = ended(d, JobState.FAILED, verdict="failed", trend="ChildFailedError: rank 3 <&>",
                recommendation=Recommendation(action="diagnose", why="first real traceback: "
                                              "RuntimeError CUDA illegal memory access"))
    return out.model_copy(update={"faults": ("time-limit: 4h", TRACEBACK)})


def completed(d: JobDetail) -> JobDetail:
    return ended(d, JobState.COMPLETED, verdict="done", trend="finished 100/100",
                 recommendation=Recommendation(action="cleanup",
                                               why="run rl-standard-job-cleanup"))


class Jobs:
    def __init__(self) -> None:
        self.rl = detail(job("4100", "rl-ppo-llama-8b"))
        self.rl2 = detail(job("4101", "rl-ppo-llama-70b"))
        self.sft = detail(job("4300", "sft-mistral-7b", bucket="sft", user="bob"))

    def all(self) -> list[JobDetail]:
        return [self.rl, self.rl2, self.sft]


def dms(slack: FakeSlack) -> list[str]:
    return [c.params["text"] for c in slack.to("/api/chat.postMessage")
            if c.params["channel"].startswith("D")]


async def notify(h: Harness, word: str, user: str = "UALICE") -> str:
    h.replies += 100 * len(h.slack.calls)  # hook names unique across restarted harnesses
    _, hook = await h.command("/jobs", f"notify {word}", user=user)
    (reply,) = await h.slack.wait_for(hook)
    return str(reply.params["text"])


async def test_failed_completed_and_stalled_jobs_dm_their_owner_once(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock) -> None:
    """alice hears of her failure (fault + advice) and completion (cleanup), each once, in
    one DM (one sweep's ends); bob, unmapped, hears nothing."""
    await notify_on(store)  # alice asked for job-end DMs
    jobs = Jobs()
    sweeper = FakeSweeper(make=lambda: build_result(jobs.all(), at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)  # the baseline: nothing is told
        assert dms(slack) == []
        jobs.rl, jobs.rl2 = failed(jobs.rl), completed(jobs.rl2)
        jobs.sft = failed(jobs.sft)
        clock.advance(1800)
        await scheduled_sweep(h.bot, 1)
        clock.advance(1800)
        await scheduled_sweep(h.bot, 2)  # nothing new: no second DM
    (dm,) = dms(slack)
    texts = dm.split("\n\n")
    assert len(texts) == 2
    fail = next(t for t in texts if "rl-ppo-llama-8b" in t)
    assert "ended FAILED" in fail and "RuntimeError: CUDA error" in fail
    assert "time-limit" not in fail  # a time limit is not the real fault
    assert "rank 3 &lt;&amp;&gt;" in fail and "*Recommendation:* diagnose" in fail
    done = next(t for t in texts if "rl-ppo-llama-70b" in t)
    assert "completed" in done and "rl-standard-job-cleanup" in done


async def test_notify_off_is_kept_per_user_in_redis_and_on_restores_it(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock) -> None:
    """After `/jobs notify off` a failure sends no DM, also from a restarted bot; `on` again."""
    jobs = Jobs()
    sweeper = FakeSweeper(make=lambda: build_result(jobs.all(), at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        assert "*off*" in await notify(h, "off")
        await scheduled_sweep(h.bot, 0)
    async with running_bot(slack, store, sweeper, clock) as h2:  # a restart: still off
        jobs.rl = failed(jobs.rl)
        clock.advance(1800)
        await scheduled_sweep(h2.bot, 1)
        assert dms(slack) == []
        assert "*on*" in await notify(h2, "on")
        jobs.rl2 = failed(jobs.rl2)
        clock.advance(1800)
        await scheduled_sweep(h2.bot, 2)
    assert len(dms(slack)) == 1 and "rl-ppo-llama-70b" in dms(slack)[0]
    assert await store.get_doc("notify:UALICE") == {"off": False}


def test_stall_and_zombie_dms_say_which() -> None:
    """A zombie (all trials done, still RUNNING) is named; a plain stall says stalled."""
    zombie = detail(job("5", "eval-qwen-swe", bucket="eval", verdict="stalled",
                        flags=("zombie",)))
    change = Change(kind="stalled", cluster="alpha", job_id="5", name="eval-qwen-swe",
                    state=JobState.RUNNING, verdict="stalled", why="zombie")
    assert "zombie (all trials done, still RUNNING)" in job_end_dm(change, zombie).text
    stall = detail(job("6", "datagen-x", bucket="datagen", verdict="stalled", flags=("stall",)))
    assert "is stalled" in job_end_dm(change.model_copy(update={"job_id": "6"}), stall).text


def test_a_live_job_judged_failed_is_not_said_to_have_ended() -> None:
    """A Kubernetes Job still active with no pods (silent wedge) is failed while the API
    calls it RUNNING: the DM says it failed, and why, not 'ended RUNNING'."""
    wedge = ended(detail(job("rl-x", "rl-x", verdict="failed", flags=("silent-wedge",))),
                  JobState.RUNNING, trend="silent wedge: running but 0 pods")
    change = Change(kind="failed", cluster="beta", job_id="rl-x", name="rl-x",
                    state=JobState.RUNNING, verdict="failed",
                    why="silent wedge: running but 0 pods")
    text = job_end_dm(change, wedge).text
    assert "ended RUNNING" not in text, text
    assert "failed (the scheduler still says RUNNING)" in text
    assert "silent wedge: running but 0 pods" in text


async def test_jobs_that_only_share_a_name_are_told_apart_and_array_tasks_together(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Two evals launched with one --job-name fail with different faults: each told with its
    own job and fault (one merged telling named the first and hid the second). Two tasks
    of one array, or components of one hetjob, that failed alike are still told as one (×2).
    All four are one DM (one sweep's ends of one owner)."""
    await notify_on(store)  # alice asked for job-end DMs
    state = {"ended": False}

    def make() -> object:
        out = []
        for job_id, name, fault in (("7001", "eval-ckpt", "oom: CUDA out of memory"),
                                    ("7050", "eval-ckpt", "nccl-timeout: WorkNCCL timeout"),
                                    ("9000_1", "sweep-arr", "oom: CUDA out of memory"),
                                    ("9000_2", "sweep-arr", "oom: CUDA out of memory"),
                                    ("8000+0", "het-run", "oom: CUDA out of memory"),
                                    ("8000+1", "het-run", "oom: CUDA out of memory")):
            d = detail(job(job_id, name, bucket="eval", user="alice"))
            if state["ended"]:
                d = ended(d, JobState.FAILED, verdict="failed", trend=fault)
                d = d.model_copy(update={"faults": (fault,)})
            out.append(d)
        return build_result(out, at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))  # type: ignore[arg-type]
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        clock.advance(1800)
        state["ended"] = True
        await scheduled_sweep(h.bot, 1)
    (dm,) = dms(slack)
    told = dm.split("\n\n")
    assert len(told) == 4
    (first,) = [t for t in told if "7001" in t]
    (second,) = [t for t in told if "7050" in t]
    assert "out of memory" in first and "NCCL" in second
    (array,) = [t for t in told if "sweep-arr" in t]
    (het,) = [t for t in told if "het-run" in t]
    assert "×2" in array and "×2" in het


async def test_an_arrays_tasks_that_failed_otherwise_are_named_in_its_one_dm(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Three tasks of one array fail: two by an OOM on different ranks (one fault), one by an
    NCCL timeout. One DM (×3), the OOM first, and the NCCL task named with its fault: the DM
    showed the first task's fault only, and the third task's was never told."""
    await notify_on(store)  # alice asked for job-end DMs
    state = {"ended": False}
    faults = {"9100_1": "oom: CUDA out of memory on rank 3",
              "9100_2": "oom: CUDA out of memory on rank 5",
              "9100_3": "nccl-timeout: WorkNCCL(SeqNum=7) ran for 600000 milliseconds"}

    def make() -> object:
        out = []
        for job_id, fault in faults.items():
            d = detail(job(job_id, "sweep-arr", bucket="eval", user="alice"))
            if state["ended"]:
                d = ended(d, JobState.FAILED, verdict="failed", trend=fault)
                d = d.model_copy(update={"faults": (fault,)})
            out.append(d)
        return build_result(out, at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))  # type: ignore[arg-type]
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        clock.advance(1800)
        state["ended"] = True
        await scheduled_sweep(h.bot, 1)
    (told,) = dms(slack)
    assert "×3" in told and "out of memory on rank 3" in told
    assert "Failed otherwise ×1 (`9100_3`)" in told and "WorkNCCL" in told
    assert "rank 5" not in told  # the second OOM is the first's kind, counted in ×3


def test_failed_dm_quotes_the_fault_once_when_the_trend_is_its_shortening() -> None:
    """The Trend cell of a failed job is its fault shortened to the cell (report.trend.shorten):
    the job-end DM quotes the whole fault, and not that cut copy of it again below."""
    from report.trend import shorten

    long_fault = ("traceback: RuntimeError: CUDA error: an illegal memory access was "
                  "encountered on device 3 while running the rollout worker's forward pass")
    assert shorten(long_fault) != long_fault
    run = ended(detail(job("7", "sft-llama")), JobState.FAILED, verdict="failed",
                trend=shorten(long_fault))
    run = run.model_copy(update={"faults": (long_fault,)})
    change = Change(kind="failed", cluster="alpha", job_id="7", name="sft-llama",
                    state=JobState.FAILED, verdict="failed", why="failed")
    text = job_end_dm(change, run).text
    assert text.count("```") == 2, text
    assert "encountered on device 3" in text


@pytest.mark.parametrize("excerpt", [
    # torch's NCCL watchdog (a c10/glog head the Trend leaves out), as on a real SLURM job
    "[E1204 10:16:10.512345 2211 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=4711, OpType=ALLREDUCE, NumelIn=262144000, "
    "NumelOut=262144000, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.",
    # srun's task-end line (the Trend puts tasks and end first, hosts last)
    "srun: error: gpu-node-017,gpu-node-018,gpu-node-019,gpu-node-020: tasks 0-31: Exited with "
    "exit code 1 after the rollout workers lost their NCCL communicator",
])
def test_failed_dm_quotes_the_fault_once_in_the_trends_own_words(excerpt: str) -> None:
    """The judge's Trend is the fault in its own words (report.failure_text.diagnosis: a c10 line
    head dropped, srun's line reordered), shortened to the cell; the job-end DM quotes the
    whole fault, and not that cut copy of it again."""
    from probes.models import Fault
    from report.failure_text import fault_text
    from report.trend import shorten

    fault = Fault(kind="nccl-timeout", line_no=3, excerpt=excerpt)
    run = ended(detail(job("7", "rl-grpo-qwen-7b")), JobState.FAILED, verdict="failed",
                trend=shorten(f"{fault.kind}: {fault_text(fault)}"))
    run = run.model_copy(update={"faults": (f"{fault.kind}: {fault.detail or fault.excerpt}",)})
    change = Change(kind="failed", cluster="alpha", job_id="7", name="rl-grpo-qwen-7b",
                    state=JobState.FAILED, verdict="failed", why="failed")
    text = job_end_dm(change, run).text
    assert text.count("```") == 2, text


async def test_one_owners_job_ends_in_one_sweep_are_one_dm(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock) -> None:
    """Six of alice's jobs end in one sweep (seen on the real SLURM: eleven DMs to one owner in
    one sweep, a ping each): one DM tells them all, each with its own id, fault and advice,
    and says once how to turn them off."""
    await notify_on(store)  # alice asked for job-end DMs
    six = [detail(job(str(4100 + i), f"rl-grid-cell-{i}")) for i in range(6)]
    state = {"ended": False}

    def make() -> object:
        out = [failed(d) if i % 2 else completed(d) for i, d in enumerate(six)] \
            if state["ended"] else six
        return build_result(out, at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(store.prefix, tmp_path))  # type: ignore[arg-type]
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        clock.advance(1800)
        state["ended"] = True
        await scheduled_sweep(h.bot, 1)
    (told,) = dms(slack)
    for i in range(6):
        assert f"alpha:{4100 + i}" in told
    assert told.count("ended FAILED") == 3 and told.count("completed.") == 3
    assert told.count("/jobs notify off") == 1


def test_an_owners_many_job_ends_split_only_past_slacks_limit() -> None:
    """Forty job ends (each text about 400 characters) are a few DMs, each within Slack's
    text limit, each job's text whole in one of them, the footer once per DM."""
    texts = [f"❌ *job-{i}* `alpha:{i}` ended FAILED.\n```\n{'x' * 350}\n```\n{NOTIFY_FOOTER}"
             for i in range(40)]
    out = job_end_dms(texts)
    assert 1 < len(out) < 10
    assert all(len(m) <= DM_TEXT_MAX and m.count(NOTIFY_FOOTER) == 1 for m in out)
    for i in range(40):
        body = texts[i].removesuffix("\n" + NOTIFY_FOOTER)
        assert sum(body in m for m in out) == 1


async def test_a_text_only_post_is_sent_as_verbatim_blocks_too(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock) -> None:
    """A job-end DM (and every post built as text only: the thread's follow-up lines) names
    the job outside code; a message's top-level text is always auto-linked by Slack, so the
    post carries its text as verbatim sections too (Slack shows the blocks; the text is the
    notification): a job named with a URL or ``#channel`` is no link in the DM."""
    await notify_on(store)  # alice asked for job-end DMs
    from tests.bot.test_home import mrkdwn_objects

    jobs = Jobs()
    jobs.rl = detail(job("4100", "rl-https://evil.example/login-#general"))
    sweeper = FakeSweeper(make=lambda: build_result(jobs.all(), at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        jobs.rl = failed(jobs.rl)
        clock.advance(1800)
        await scheduled_sweep(h.bot, 1)
    posts = slack.to("/api/chat.postMessage")
    (dm,) = [c for c in posts if c.params["channel"] == "DALICE"]
    objects = mrkdwn_objects(dm.params.get("blocks"))
    assert objects and all(o["verbatim"] is True for o in objects)
    assert "\n".join(o["text"] for o in objects) == dm.params["text"]
    assert not [c.params["text"][:60] for c in posts if not c.params.get("blocks")]
