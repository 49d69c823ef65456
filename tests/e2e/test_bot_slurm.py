"""Issue 4 end to end: the Slack bot over the real SLURM 22.05 (real SSH) and the real Redis.

Slack is the fake Web API on port 0; everything else is real. The bot is served on port 0 and
driven as Slack drives it (signed block_actions requests); its scheduled sweep runs through the
real :class:`bot.sweep.Sweeper` and ``SlurmProbe`` against a config TOML, with a fake clock for
the bot. Four real ``sbatch`` jobs (user ``jobtables``) print a SkyRL log whose last steps
collapse, bank ``checkpoints/global_step_10`` and then sleep, so they stay RUNNING: ``watch``
(DM, restart, stranger), ``cancel`` (really cancelled), ``nokill`` and ``requeue`` (requeued
after its alert). They are submitted once per module and scancelled in its teardown.

Each scenario's config puts only its own job in the RL bucket (``[buckets] rl``): the test
user's other jobs (the other scenarios', or a concurrent test run's) are then not RL runs and
cannot collapse, so "exactly one DM" is exact on a shared cluster.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.alerts import episode_name
from bot.config_file import load_config
from bot.config_source import ConfigSource
from bot.scheduled import make_scheduler
from bot.scheduler import interval_number
from bot.sweep import Sweeper
from probes.models import JobState
from probes.slurm.parse import parse_squeue_json
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import SshRunner
from tests.bot.builders import FakeClock, blocks_text
from tests.bot.conftest import Harness, make_store, running_bot
from tests.bot.fake_slack import Call, FakeSlack, action_body, signed_headers
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_e2e import _cleanup, _config_toml, _wait_for

ROOT = Path(__file__).resolve().parents[2]
COLLAPSE_LOG = ROOT / "tests" / "fixtures" / "skyrl-rebuilt" / "console_v03_collapse.log"
CLUSTER = "local22"
OWNER = "UJOBTABLES"
"""The Slack id ``slack.owners`` maps the cluster user ``jobtables`` to."""
DM = "DJOBTABLES"
"""The DM channel the fake Slack opens for OWNER."""
OPERATOR, STRANGER = "UOPS", "UEVIL"
CHANNEL = "C0SWEEP"
ROLES = ("watch", "cancel", "nokill", "requeue")
JOB_SCRIPT = """#!/bin/bash
mkdir -p checkpoints/global_step_10
cat "{log}"
exec sleep 600
"""


@dataclass(frozen=True)
class Jobs:
    """The module's running jobs: role -> SLURM id and job name."""

    env: SlurmEnv
    tag: str
    ids: dict[str, str]
    names: dict[str, str]
    configs: Path

    def ref(self, role: str) -> str:
        return f"{CLUSTER}:{self.ids[role]}"


async def _submit(env: SlurmEnv, tag: str, run_dir: str) -> dict[str, str]:
    runner = SshRunner(env.cluster())
    ids: dict[str, str] = {}
    try:
        await runner.run(["sh", "-c", 'mkdir -p "$1" && cat > "$1/collapse.log"', "sh", run_dir],
                         stdin=COLLAPSE_LOG.read_text())
        for role in ROLES:
            workdir = f"{run_dir}/{role}"
            await runner.run(["mkdir", "-p", workdir])
            # --time bounds a job a crashed test run failed to scancel.
            res = await runner.run(
                ["sbatch", "--parsable", "--time=15", "-J", f"rl-grpo-{tag}-{role}",
                 "--chdir", workdir],
                stdin=JOB_SCRIPT.format(log=f"{run_dir}/collapse.log"))
            ids[role] = res.stdout.strip().split(";")[0]
    finally:
        await runner.aclose()
    return ids


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv, redis_url: str,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    """Submit the three collapsing jobs once and wait until they run; scancel them after."""
    tag = f"e2e{secrets.token_hex(3)}"
    run_dir = f"{slurm_env.scratch}/bot-{tag}"
    ids: dict[str, str] = {}
    try:
        ids = asyncio.run(_submit(slurm_env, tag, run_dir))
        # settle: the log is printed in one go at start; a second covers the write.
        asyncio.run(_wait_for(slurm_env, ids, {r: {JobState.RUNNING} for r in ROLES},
                              bound_s=90, settle_s=1))
        yield Jobs(slurm_env, tag, ids, {r: f"rl-grpo-{tag}-{r}" for r in ROLES},
                   tmp_path_factory.mktemp("configs"))
    finally:
        asyncio.run(_cleanup(slurm_env, ids, run_dir))


def write_config(jobs: Jobs, role: str, prefix: str, incidents: Path, *,
                 no_kill: bool = False, period_hours: int = 24) -> Path:
    """The bot's TOML: the real cluster over SSH, only ``role``'s job in the RL bucket;
    ``period_hours``: the digest's period (one parent message each)."""
    directory = jobs.configs / prefix.strip(":")
    directory.mkdir()
    path = _config_toml(jobs.env, directory)
    path.write_text(path.read_text() + f"""
[buckets]
rl = ["^{jobs.names[role]}$"]

[redis]
key_prefix = "{prefix}"

[slack]
channel = "{CHANNEL}"
sweep_every_minutes = 30
no_kill = {"true" if no_kill else "false"}
operators = ["{OPERATOR}"]
incident_dir = "{incidents}"

[digest]
period_hours = {period_hours}

[slack.owners]
jobtables = "{OWNER}"
""")
    return path


@asynccontextmanager
async def slurm_bot(slack: FakeSlack, config: Path, prefix: str,
                    clock: FakeClock) -> AsyncIterator[Harness]:
    """One bot process: its own Redis client and Sweeper (re-reading ``config``), on port 0."""
    store = make_store(prefix)
    source = ConfigSource(lambda: load_config(config))
    sweeper = Sweeper(source.load, state=store)
    try:
        # running_bot hands the sweeper to Bot only: the real Sweeper is what it stands for.
        async with running_bot(slack, store, sweeper, clock,  # type: ignore[arg-type]
                               config=source) as harness:
            yield harness
    finally:
        await sweeper.aclose()
        await store.aclose()


def dms(slack: FakeSlack) -> list[Call]:
    return [c for c in slack.to("/api/chat.postMessage") if c.params.get("channel") == DM]


def buttons(call: Call) -> list[str]:
    return [e["action_id"] for b in call.params["blocks"] if b["type"] == "actions"
            for e in b["elements"]]


async def press(h: Harness, action_id: str, ref: str, *, user: str) -> str:
    """Press a button on the job's DM exactly as Slack posts it; return the response_url path."""
    episode = await h.bot.store.get_doc(episode_name(*ref.split(":")))
    assert episode is not None, f"no collapse episode for {ref}"
    (dm,) = [c for c in dms(h.slack) if ref in json.dumps(c.params["blocks"])]
    h.replies += 1
    hook = f"e2e{h.replies}"
    body = action_body(action_id, ref, user=user, response_url=h.slack.response_url(hook),
                       channel=episode["channel"], message_ts=episode["ts"],
                       blocks=dm.params["blocks"])
    status, _ = await h.post(body, signed_headers(body))
    assert status == 200
    return f"/webhook/{hook}"


async def squeue_state(env: SlurmEnv, job_id: str) -> JobState | None:
    runner = SshRunner(env.cluster())
    try:
        res = await runner.run(["squeue", "--json"])
    finally:
        await runner.aclose()
    records = parse_squeue_json(res.stdout, cluster=CLUSTER, now=datetime.now(UTC))
    return next((r.state for r in records if r.job_id == job_id), None)


def salvage_files(incidents: Path, job_id: str) -> list[Path]:
    return sorted(incidents.rglob(f"*-{CLUSTER}-{job_id}-salvage.json"))


async def test_collapsing_run_gets_exactly_one_dm(
    jobs: Jobs, slack: FakeSlack, redis_prefix: str, tmp_path: Path,
) -> None:
    """One scheduled sweep of the real cluster: one owner DM with evidence and three buttons."""
    config = write_config(jobs, "watch", redis_prefix, tmp_path / "incidents")
    async with slurm_bot(slack, config, redis_prefix, FakeClock(datetime.now(UTC))) as h:
        assert await make_scheduler(h.bot).tick()
    (opened,) = slack.to("/api/conversations.open")
    assert opened.params["users"] == OWNER
    (dm,) = dms(slack)
    assert buttons(dm) == ["cancel_salvage", "keep_running", "snooze", "deep_probe"]
    values = {e["value"] for b in dm.params["blocks"] if b["type"] == "actions"
              for e in b["elements"]}
    assert values == {jobs.ref("watch")}
    text = blocks_text(dm.params["blocks"])
    assert (f"*Collapse on* `{jobs.ref('watch')}` *{jobs.names['watch']}* (owner jobtables)"
            in text)
    # the salvage target: step 10, the last save before the collapse began (06582d9)
    assert "salvage banked step 10 (the last before the collapse began at step 20)" in text
    assert "`grad_norm` step" in text and "`entropy` step" in text
    thread = [c for c in slack.to("/api/chat.postMessage") if c.params["channel"] == CHANNEL]
    assert thread, "the scheduled sweep posts its thread to slack.channel"


async def test_cancel_salvages_before_the_real_scancel(
    jobs: Jobs, slack: FakeSlack, redis_prefix: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner's cancel_salvage: incident on disk while squeue says RUNNING, then CANCELLED."""
    incidents = tmp_path / "incidents"
    job_id = jobs.ids["cancel"]
    config = write_config(jobs, "cancel", redis_prefix, incidents)
    seen: list[tuple[list[Path], JobState | None, str | None]] = []
    real_cancel = SlurmProbe.cancel

    async def watched_cancel(self: SlurmProbe, cancel_id: str, *, uid: str | None = None,
                             owner: str | None = None) -> None:
        seen.append((salvage_files(incidents, cancel_id), await squeue_state(jobs.env, cancel_id),
                     owner))
        await real_cancel(self, cancel_id, uid=uid, owner=owner)

    monkeypatch.setattr(SlurmProbe, "cancel", watched_cancel)
    async with slurm_bot(slack, config, redis_prefix, FakeClock(datetime.now(UTC))) as h:
        assert await make_scheduler(h.bot).tick()
        await press(h, "cancel_salvage", jobs.ref("cancel"), user=OWNER)
        await h.bot.tasks.drain()
        (incident,) = salvage_files(incidents, job_id)
        doc = await h.bot.store.get_doc(f"incident:{incident.stem}")
    # scancel --user=<the job's owner>: an id given meanwhile to another user's job is spared
    assert seen == [([incident], JobState.RUNNING, jobs.env.user)]
    await _wait_for(jobs.env, {"cancel": job_id}, {"cancel": {JobState.CANCELLED}},
                    bound_s=60, settle_s=0)
    record: dict[str, Any] = json.loads(incident.read_text())
    assert record["kind"] == "salvage" and record["actor"] == OWNER
    assert record["banked_step"] == 10 and record["collapse_step"] is not None
    assert record["scheduler_record"]["job_id"] == job_id
    assert record["scheduler_record"]["state"] == "RUNNING"
    assert "policy_entropy" in record["log_tail"] and record["metric_window"]
    assert doc is not None and doc["job_id"] == job_id
    final = slack.to("/api/chat.update")[-1].params
    assert final["channel"] == DM
    assert all(b["type"] != "actions" for b in final["blocks"])
    assert f"Cancelled by <@{OWNER}>" in final["text"] and str(incident) in final["text"]


async def test_no_kill_recommends_records_and_leaves_the_job_running(
    jobs: Jobs, slack: FakeSlack, redis_prefix: str, tmp_path: Path,
) -> None:
    """no_kill: an acknowledge-only DM, the evidence recorded, and the job still RUNNING."""
    incidents = tmp_path / "incidents"
    job_id = jobs.ids["nokill"]
    config = write_config(jobs, "nokill", redis_prefix, incidents, no_kill=True)
    async with slurm_bot(slack, config, redis_prefix, FakeClock(datetime.now(UTC))) as h:
        assert await make_scheduler(h.bot).tick()
        (dm,) = dms(slack)
        assert buttons(dm) == ["acknowledge", "deep_probe"]
        (incident,) = salvage_files(incidents, job_id)
        doc = await h.bot.store.get_doc(f"incident:{incident.stem}")
        assert (doc["id"], doc["kind"], doc["job_id"]) == (incident.stem, "salvage", job_id)
        hook = await press(h, "acknowledge", jobs.ref("nokill"), user=OWNER)
        await h.bot.tasks.drain()
        episode = await h.bot.store.get_doc(episode_name(CLUSTER, job_id))
        audit = await h.bot.store.audit_entries()
    record: dict[str, Any] = json.loads(incident.read_text())
    assert record["actor"] is None and record["banked_step"] == 10
    assert record["recommendation"]["why"].startswith("RECOMMENDATION ONLY")
    assert "policy_entropy" in record["log_tail"]
    assert str(incident) in blocks_text(dm.params["blocks"])
    assert episode is not None and episode["action"] == "acknowledge"
    assert [(e["actor"], e["outcome"]) for e in audit] == [(OWNER, "acknowledged")]
    assert not slack.to(hook), "acknowledge answers by updating the DM, not ephemerally"
    assert "Acknowledged by" in slack.to("/api/chat.update")[-1].params["text"]
    assert await squeue_state(jobs.env, job_id) is JobState.RUNNING


async def test_restarted_bot_sends_no_second_dm(
    jobs: Jobs, slack: FakeSlack, redis_prefix: str, tmp_path: Path,
) -> None:
    """A fresh bot on the same Redis and config, next interval's sweep: the episode stays quiet.
    Both sweeps fall in one digest period whatever the time of day (a day's period, UTC
    midnight, lies between them when the test runs in the half hour before it): the first
    period length from a day up whose boundary is not between them."""
    clock = FakeClock(datetime.now(UTC))
    period_hours = next(hours for hours in range(24, 48) if interval_number(
        clock(), hours * 3600) == interval_number(clock() + timedelta(minutes=30), hours * 3600))
    config = write_config(jobs, "watch", redis_prefix, tmp_path / "incidents",
                          period_hours=period_hours)
    async with slurm_bot(slack, config, redis_prefix, clock) as first:
        assert await make_scheduler(first.bot).tick()
    assert len(dms(slack)) == 1
    threads_before = len(slack.to("/api/chat.postMessage"))
    clock.advance(30 * 60)
    async with slurm_bot(slack, config, redis_prefix, clock) as second:
        assert await make_scheduler(second.bot).tick()
        episode = await second.bot.store.get_doc(episode_name(CLUSTER, jobs.ids["watch"]))
    # The second sweep edits the day's parent in place (bot/digest.py), it posts no new one.
    assert slack.to("/api/chat.update"), "the second sweep edited the day's parent"
    assert not [c for c in slack.to("/api/chat.postMessage")[threads_before:]
                if c.params["channel"] == CHANNEL and not c.params.get("thread_ts")]
    assert len(dms(slack)) == 1
    assert len(slack.to("/api/conversations.open")) == 1
    assert episode is not None and episode["state"] == "open"


async def test_stranger_cannot_cancel(
    jobs: Jobs, slack: FakeSlack, redis_prefix: str, tmp_path: Path,
) -> None:
    """cancel_salvage from someone neither operator nor owner: ephemeral refusal, audited."""
    config = write_config(jobs, "watch", redis_prefix, tmp_path / "incidents")
    async with slurm_bot(slack, config, redis_prefix, FakeClock(datetime.now(UTC))) as h:
        assert await make_scheduler(h.bot).tick()
        hook = await press(h, "cancel_salvage", jobs.ref("watch"), user=STRANGER)
        await h.bot.tasks.drain()
        (reply,) = slack.to(hook)
        audit = await h.bot.store.audit_entries()
    assert reply.params["response_type"] == "ephemeral"
    assert "Only the job's owner or an operator" in reply.params["text"]
    assert [(e["actor"], e["outcome"], e["job_id"]) for e in audit] == [
        (STRANGER, "refused", jobs.ids["watch"])]
    assert not slack.to("/api/chat.update")
    assert not salvage_files(tmp_path / "incidents", jobs.ids["watch"])
    assert await squeue_state(jobs.env, jobs.ids["watch"]) is JobState.RUNNING


HOSTILE_NAME = "rl-grpo <!channel> <https://evil.example/login|Re-authenticate>"
HOSTILE_LINE = "WARNING <!here> ``` <https://evil.example/x|click> & <@U0EVIL> done"
HOSTILE_SCRIPT = """#!/bin/bash
mkdir -p checkpoints/global_step_10
cat "{log}"
echo '{line}'
exec sleep 600
"""


def slack_strings(value: Any) -> list[str]:
    """Every string the bot sent Slack in one call (blocks JSON decoded)."""
    if isinstance(value, str):
        if value.startswith("[") or value.startswith("{"):
            try:
                return slack_strings(json.loads(value))
            except ValueError:
                pass
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in slack_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in slack_strings(v)]
    return []


async def test_hostile_job_name_pings_nobody_and_links_nowhere(
    slurm_env: SlurmEnv, slack: FakeSlack, redis_prefix: str, tmp_path: Path,
) -> None:
    """A real job named like a phishing ping, with a hostile log line: every Slack call
    (parent, thread, collapse DM, /job answer) carries it escaped, never as markup."""
    import re

    tag = f"hx{secrets.token_hex(3)}"
    run_dir = f"{slurm_env.scratch}/bot-{tag}"
    runner = SshRunner(slurm_env.cluster())
    ids: dict[str, str] = {}
    try:
        await runner.run(["sh", "-c", 'mkdir -p "$1" && cat > "$1/collapse.log"', "sh", run_dir],
                         stdin=COLLAPSE_LOG.read_text())
        await runner.run(["mkdir", "-p", f"{run_dir}/w"])
        res = await runner.run(
            ["sbatch", "--parsable", "--time=15", "-J", HOSTILE_NAME, "--chdir", f"{run_dir}/w"],
            stdin=HOSTILE_SCRIPT.format(log=f"{run_dir}/collapse.log", line=HOSTILE_LINE))
        ids["hostile"] = res.stdout.strip().split(";")[0]
        await _wait_for(slurm_env, ids, {"hostile": {JobState.RUNNING}}, bound_s=90, settle_s=1)
        directory = tmp_path / "cfg"
        directory.mkdir()
        path = _config_toml(slurm_env, directory)
        rl = json.dumps("^" + re.escape(HOSTILE_NAME) + "$")
        path.write_text(path.read_text() + f"""
[buckets]
rl = [{rl}]

[redis]
key_prefix = "{redis_prefix}"

[slack]
channel = "{CHANNEL}"
operators = ["{OPERATOR}"]
incident_dir = "{tmp_path / 'incidents'}"

[slack.owners]
jobtables = "{OWNER}"
""")
        async with slurm_bot(slack, path, redis_prefix, FakeClock(datetime.now(UTC))) as h:
            assert await make_scheduler(h.bot).tick()
            _, hook = await h.command("/job", f"{CLUSTER}:{ids['hostile']}", user=OWNER)
            await slack.wait_for(hook)
            await h.bot.tasks.drain()
    finally:
        await runner.aclose()
        await _cleanup(slurm_env, ids, run_dir)
    sent = [s for call in slack.calls for s in slack_strings(call.params)]
    everything = "\n".join(sent)
    assert dms(slack), "the collapse DM was sent"
    assert "&lt;!channel&gt;" in everything, "the name is shown, escaped"
    for text in sent:
        bare = re.sub(r"<@U[A-Z0-9]+>", "", text)
        assert "<" not in bare and ">" not in bare, text
        assert "<!channel" not in text and "<https://evil" not in text and "<!here" not in text


async def test_an_alert_s_cancel_after_its_job_was_requeued_cancels_nothing(
    jobs: Jobs, slack: FakeSlack, redis_prefix: str, tmp_path: Path,
) -> None:
    """The alerted job is requeued (``scontrol requeue``: SLURM 22.05 gives it a new submit time
    and restart_cnt 1, the record a later job given the id and requeued itself would show).
    The owner's cancel on the old alert is refused, saying so, audited stale; no evidence is
    salvaged and the job is not cancelled (the requeue count passed it off as the alert's)."""
    job_id = jobs.ids["requeue"]
    config = write_config(jobs, "requeue", redis_prefix, tmp_path / "incidents")
    async with slurm_bot(slack, config, redis_prefix, FakeClock(datetime.now(UTC))) as h:
        assert await make_scheduler(h.bot).tick()
        runner = SshRunner(jobs.env.cluster())
        try:
            await runner.run(["scontrol", "requeue", job_id])
        finally:
            await runner.aclose()
        await _wait_for(jobs.env, {"requeue": job_id}, {"requeue": {JobState.PENDING}},
                        bound_s=60, settle_s=0)
        hook = await press(h, "cancel_salvage", jobs.ref("requeue"), user=OWNER)
        await h.bot.tasks.drain()
        (reply,) = slack.to(hook)
        audit = await h.bot.store.audit_entries()
    assert reply.params["response_type"] == "ephemeral"
    assert "requeued 1x" in reply.params["text"] and "Nothing was done" in reply.params["text"]
    assert [(e["actor"], e["outcome"]) for e in audit] == [(OWNER, "stale")]
    assert not salvage_files(tmp_path / "incidents", job_id)
    assert await squeue_state(jobs.env, job_id) in (JobState.PENDING, JobState.RUNNING)
