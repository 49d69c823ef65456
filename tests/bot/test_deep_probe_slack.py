"""The Slack Deep-probe button and the once-per-run offer/auto-probe, on the fake Web API.

The probe itself is real: a job on the real SLURM 22.05 cluster (over SSH) prints the real
corrupted-weights TRL log, and the button's press reads it through ``jobtables``' own probe.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.config import Config, DeepProbeSection
from bot.config_source import ConfigSource
from bot.deep_probe import after_sweep
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, detail, job, sweep_result
from tests.bot.conftest import Harness, make_config, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.probes.remote.test_rollouts_e2e import _cleanup, _submit
from tests.probes.slurm.conftest import SlurmEnv, slurm_env

_ = slurm_env


@pytest.fixture(scope="module")
def corrupt_job(slurm_env: SlurmEnv) -> Iterator[str]:
    run_dir = f"{slurm_env.scratch}/probe-bot-{secrets.token_hex(4)}"
    job_id = asyncio.run(_submit(slurm_env, run_dir, "corrupt"))
    try:
        yield job_id
    finally:
        asyncio.run(_cleanup(slurm_env, [job_id], run_dir))


def _config(base: Config, env: SlurmEnv, **changes: object) -> Config:
    cluster = env.cluster(name="alpha")
    slack = base.slack.model_copy(update=changes)
    return base.model_copy(update={"clusters": (cluster,), "slack": slack,
                                   "deep_probe": DeepProbeSection(auto=True)})


@pytest.fixture
async def probing(*, slack: FakeSlack, store: object, sweeper: FakeSweeper, clock: FakeClock,
                  slurm_env: SlurmEnv, corrupt_job: str, prefix: str,
                  tmp_path: Path) -> AsyncIterator[Harness]:
    flagged = detail(job(corrupt_job, "rl-grpo-probe-corrupt", flags=("deep-probe",)))
    sweeper.make = lambda: sweep_result([flagged], at=clock())
    sweeper.conf = _config(make_config(prefix, tmp_path), slurm_env)
    await _started(slurm_env, corrupt_job)
    async with running_bot(slack, store, sweeper, clock,  # type: ignore[arg-type]
                           config=_LiveSource(lambda: sweeper.conf)) as h:
        yield h


class _LiveSource(ConfigSource):
    """The tests edit the fake sweeper's config between presses: read it at every use."""

    def current(self) -> Config:
        return self.load()


async def _started(env: SlurmEnv, job_id: str) -> None:
    """Wait (bounded) until the job printed its log: the probe reads what it printed."""
    from bot.deep_probe import run_deep_probe

    config = Config(clusters=(env.cluster(name="alpha"),))
    for _attempt in range(150):  # bounded: the shared cluster may queue the job
        found = await run_deep_probe(config, "alpha", job_id)
        if found.report.deep_probe and found.report.deep_probe.read["log_steps"] >= 20:
            return
        await asyncio.sleep(2)
    pytest.fail(f"job {job_id} never printed its log")


async def test_button_posts_kill_in_thread_with_cancel(probing: Harness,
                                                       corrupt_job: str) -> None:
    """The press is acked, the probe runs, the KILL verdict lands in the thread, quoted."""
    status, _hook = await probing.press("deep_probe", f"alpha:{corrupt_job}", user="UALICE")
    assert status == 200
    (post,) = await probing.slack.wait_for("/api/chat.postMessage", within=60)
    assert post.params["thread_ts"] == "1700000000.000001"  # the pressed message's thread
    assert post.params["channel"] == "D0ALICE"
    text = blocks_text(post.params["blocks"])
    assert f"Deep probe of* `alpha:{corrupt_job}`" in text and "KILL" in text
    assert "weight-sync garbage at step 20" in text
    assert '"cancel_salvage"' in str(post.params["blocks"]).replace("'", '"')
    doc = await probing.bot.store.get_doc(f"deep_probe:alpha:{corrupt_job}")
    assert doc["deep_probe"]["verdict"] == "KILL" and doc["by"] == "UALICE"


async def test_no_kill_makes_it_a_recommendation(probing: Harness, corrupt_job: str,
                                                 slurm_env: SlurmEnv) -> None:
    """With no_kill there is no cancel button: an acknowledge-only recommendation."""
    probing.sweeper.conf = _config(probing.sweeper.conf, slurm_env, no_kill=True)
    await probing.press("deep_probe", f"alpha:{corrupt_job}", user="UALICE")
    (post,) = await probing.slack.wait_for("/api/chat.postMessage", within=60)
    blocks = str(post.params["blocks"])
    assert "acknowledge" in blocks and "cancel_salvage" not in blocks
    assert "recommendation" in blocks_text(post.params["blocks"])


async def test_bad_button_value_runs_nothing(probing: Harness) -> None:
    _status, hook = await probing.press("deep_probe", "alpha:$(reboot)", user="UALICE")
    (reply,) = await probing.slack.wait_for(hook)
    assert "no valid job reference" in reply.params["text"]
    assert not probing.slack.to("/api/chat.postMessage")


async def test_auto_probe_runs_once_per_run(probing: Harness, corrupt_job: str) -> None:
    """[deep_probe] auto: the run is probed and DMed once; the next sweep repeats nothing."""
    bot, config = probing.bot, probing.sweeper.conf
    result = probing.sweeper.make()
    assert await after_sweep(bot, result, config) == [f"alpha:{corrupt_job}"]
    assert await after_sweep(bot, result, config) == []
    posts = probing.slack.to("/api/chat.postMessage")
    assert len(posts) == 1 and "KILL" in blocks_text(posts[0].params["blocks"])
    assert probing.slack.to("/api/conversations.open")  # the owner's DM
    doc = await bot.store.get_doc(f"deep_probe:alpha:{corrupt_job}")
    assert doc["by"] == "scheduler" and doc["deep_probe"]["verdict"] == "KILL"


async def test_neither_auto_nor_offer_posts_nothing(probing: Harness) -> None:
    config = probing.sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection()})
    assert await after_sweep(probing.bot, probing.sweeper.make(), config) == []
    assert not probing.slack.to("/api/chat.postMessage")


async def test_offer_without_auto(probing: Harness, corrupt_job: str) -> None:
    """Without auto the run gets one offer carrying the Deep-probe button, nothing probed."""
    config = probing.sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(offer=True)})
    result = probing.sweeper.make()
    assert await after_sweep(probing.bot, result, config) == [f"alpha:{corrupt_job}"]
    (post,) = probing.slack.to("/api/chat.postMessage")
    assert "Deep probe of" not in blocks_text(post.params["blocks"])
    assert '"deep_probe"' in str(post.params["blocks"]).replace("'", '"')
    assert "Deep-probe" in str(post.params["blocks"])


async def test_job_row_carries_the_button_and_answers_ephemerally(probing: Harness,
                                                                  corrupt_job: str) -> None:
    """`/job` on a deep-probe row shows the button; pressed there, the verdict is ephemeral."""
    import json
    import urllib.parse

    from tests.bot.fake_slack import action_body, signed_headers

    _status, hook = await probing.command("/job", f"alpha:{corrupt_job}")
    (answer,) = await probing.slack.wait_for(hook)
    assert '"deep_probe"' in json.dumps(answer.params["blocks"])
    body = action_body("deep_probe", f"alpha:{corrupt_job}", user="UALICE",
                       response_url=probing.slack.response_url("eph"))
    payload = json.loads(urllib.parse.unquote(body.removeprefix("payload=")))
    payload["container"]["is_ephemeral"] = True
    body = "payload=" + urllib.parse.quote(json.dumps(payload))
    status, _ = await probing.post(body, signed_headers(body))
    assert status == 200
    (reply,) = await probing.slack.wait_for("/webhook/eph", within=60)
    assert reply.params["response_type"] == "ephemeral"
    assert "KILL" in reply.params["text"] and "in your DM" in reply.params["text"]
    # The KILL's Cancel button went to the presser's DM, bound to that message's episode:
    (post,) = probing.slack.to("/api/chat.postMessage")
    assert post.params["channel"] == "DALICE" and not post.params.get("thread_ts")
    assert "KILL" in blocks_text(post.params["blocks"])
    assert '"cancel_salvage"' in json.dumps(post.params["blocks"])
    where = {"channel": post.answer["channel"], "ts": post.answer["ts"]}
    await probing.press("cancel_salvage", f"alpha:{corrupt_job}", user="UALICE",
                        blocks=post.params["blocks"], **where)
    await probing.bot.tasks.drain()
    assert probing.sweeper.cancels == [("alpha", corrupt_job)]


async def test_ephemeral_verdict_without_a_dm_shows_no_dead_button(
        probing: Harness, corrupt_job: str) -> None:
    """If the presser's DM cannot be opened, the ephemeral verdict carries no button: nothing
    stored could honour a press on it."""
    import json
    import urllib.parse

    from tests.bot.fake_slack import action_body, signed_headers

    probing.slack.fail("conversations.open", "channel_not_found")
    body = action_body("deep_probe", f"alpha:{corrupt_job}", user="UALICE",
                       response_url=probing.slack.response_url("eph2"))
    payload = json.loads(urllib.parse.unquote(body.removeprefix("payload=")))
    payload["container"]["is_ephemeral"] = True
    body = "payload=" + urllib.parse.quote(json.dumps(payload))
    await probing.post(body, signed_headers(body))
    (reply,) = await probing.slack.wait_for("/webhook/eph2", within=60)
    assert "KILL" in blocks_text(reply.params["blocks"])
    assert not [b for b in reply.params["blocks"] if b["type"] == "actions"]
    assert "could not be sent to your DM" in blocks_text(reply.params["blocks"])
    assert not probing.slack.to("/api/chat.postMessage")


async def test_failed_auto_probe_is_retried_next_sweep(probing: Harness,
                                                       slurm_env: SlurmEnv) -> None:
    """An auto-probe that cannot reach the cluster releases its claim instead of muting it."""
    from tests.probes.slurm.conftest import closed_port

    config = probing.sweeper.conf
    dead = config.model_copy(update={"clusters": (slurm_env.cluster(
        name="alpha", port=closed_port(), connect_timeout_s=2.0),)})
    result = probing.sweeper.make()
    assert await after_sweep(probing.bot, result, dead) == []
    assert not probing.slack.to("/api/chat.postMessage")
    ref = next(iter(result.details))
    assert await after_sweep(probing.bot, result, config) == [f"{ref[0]}:{ref[1]}"]


async def test_kill_cancel_follows_the_collapse_rules(probing: Harness, corrupt_job: str) -> None:
    """The verdict's cancel button is the collapse one: strangers refused, the owner salvages."""
    await probing.press("deep_probe", f"alpha:{corrupt_job}", user="UALICE")
    (post,) = await probing.slack.wait_for("/api/chat.postMessage", within=60)
    # The verdict's episode is stored once Slack has answered the post: a press comes after
    # (as a person reads the verdict first), not in the milliseconds between.
    await probing.bot.tasks.drain()
    blocks = post.params["blocks"]
    where = {"channel": post.answer["channel"], "ts": post.answer["ts"]}
    _status, hook = await probing.press("cancel_salvage", f"alpha:{corrupt_job}", user="UEVIL",
                                        blocks=blocks, **where)
    (refusal,) = await probing.slack.wait_for(hook)
    assert "Only the job's owner or an operator" in refusal.params["text"]
    assert probing.sweeper.cancels == []
    await probing.press("cancel_salvage", f"alpha:{corrupt_job}", user="UALICE", blocks=blocks,
                        **where)
    await probing.bot.tasks.drain()
    assert probing.sweeper.cancels == [("alpha", corrupt_job)]


async def test_the_offer_goes_to_the_owner_on_that_cluster(
        harness: Harness, prefix: str, tmp_path: Path) -> None:
    """Per-cluster ``owners`` win over ``[slack.owners]`` (alice here is not alice on another
    cluster): the offer is DMed to the Slack user mapped on the job's own cluster."""
    base = make_config(prefix, tmp_path)  # [slack.owners] alice = UALICE
    (alpha,) = base.clusters
    config = base.model_copy(update={
        "clusters": (alpha.model_copy(update={"owners": {"alice": "UALICE2"}}),),
        "deep_probe": DeepProbeSection(offer=True)})
    flagged = detail(job("4242", "rl-grpo-qwen-7b", user="alice", flags=("deep-probe",)))
    result = sweep_result([flagged], at=harness.clock())
    assert await after_sweep(harness.bot, result, config) == ["alpha:4242"]
    (opened,) = harness.slack.to("/api/conversations.open")
    assert opened.params["users"] == "UALICE2"


async def test_a_kill_verdict_does_not_silence_the_owner_s_collapse_alert(
        probing: Harness, corrupt_job: str) -> None:
    """A deep probe said KILL (its verdict and buttons in the presser's thread); the run then
    collapses: the owner still gets the collapse DM, and each message's buttons act on their
    own episode (the verdict's episode used the collapse alert's key, which then read as
    already alerted: no DM, ever)."""
    import json

    from tests.bot.builders import collapsing

    await probing.press("deep_probe", f"alpha:{corrupt_job}", user="UALICE")
    (verdict,) = await probing.slack.wait_for("/api/chat.postMessage", within=60)
    assert "KILL" in blocks_text(verdict.params["blocks"])
    await probing.bot.tasks.drain()  # the verdict's episode is stored after its post
    probing.sweeper.make = lambda: sweep_result([collapsing(corrupt_job)], at=probing.clock())
    result = probing.sweeper.make()
    sent = await probing.bot.alerter.process(list(result.details.values()),
                                             probing.bot.config.current(), facts=result.facts)
    assert sent == [f"alpha:{corrupt_job}"]
    (dm,) = [c for c in probing.slack.to("/api/chat.postMessage")
             if c.params["channel"] == "DALICE"]
    assert '"cancel_salvage"' in json.dumps(dm.params["blocks"])
    # The verdict's own cancel still works, on its own message, once.
    await probing.press("cancel_salvage", f"alpha:{corrupt_job}", user="UALICE",
                        blocks=verdict.params["blocks"], channel=verdict.answer["channel"],
                        ts=verdict.answer["ts"])
    await probing.bot.tasks.drain()
    assert probing.sweeper.cancels == [("alpha", corrupt_job)]


@pytest.mark.parametrize("reasons", [
    [f"rollout {i}: <garbage> & 'weights' out of sync at step {i}" for i in range(80)],
    ["<" * 4000],
])
def test_a_long_verdict_is_cut_whole_and_says_so(reasons: list[str], prefix: str,
                                                 tmp_path: Path) -> None:
    """Reasons past a section's 3,000 characters: whole escaped lines while they fit, then a
    line counting the rest and naming `jobtables probe`; no entity torn (the escaped text was
    sliced at 2,900 characters: reasons vanished unsaid and a bare ``&`` was left)."""
    import re

    from bot.deep_probe import verdict_blocks
    from report.models import DeepProbe

    base = detail(job("4242", "rl-grpo-x", flags=("deep-probe",)))
    probed = base.model_copy(update={"report": base.report.model_copy(update={
        "deep_probe": DeepProbe(verdict="KILL", reasons=reasons, read={})})})
    blocks = verdict_blocks(probed, make_config(prefix, tmp_path))
    texts = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert all(len(t) <= 3000 for t in texts)
    body = texts[1]
    assert not re.search(r"&(?!(?:amp|lt|gt);)", body) and "<" not in body
    if len(reasons) > 1:
        assert body.count("\n• ") + 1 < len(reasons)
        kept = body.count("• ")
        assert body.splitlines()[-1] == (f"… {len(reasons) - kept} more reason(s) cut: "
                                         "`jobtables probe alpha:4242` prints them all.")
    else:
        assert body.endswith("… (cut)")


async def test_a_failed_probe_press_names_no_address_or_key_path(
        probing: Harness, corrupt_job: str, slurm_env: SlurmEnv) -> None:
    """The press's cluster cannot be reached (its port closed): the reply says the probe
    failed and why, without the login node's host:port or the SSH key's path."""
    from tests.probes.slurm.conftest import closed_port

    port = closed_port()
    cluster = slurm_env.cluster(name="alpha", port=port, connect_timeout_s=2.0)
    probing.sweeper.conf = probing.sweeper.conf.model_copy(update={"clusters": (cluster,)})
    _status, hook = await probing.press("deep_probe", f"alpha:{corrupt_job}", user="UALICE")
    (reply,) = await probing.slack.wait_for(hook, within=60)
    text = reply.params["text"]
    assert f"Deep probe of `alpha:{corrupt_job}` failed: " in text
    assert str(port) not in text and "127.0.0.1" not in text, text
    for key in cluster.client_keys or ():
        assert str(key) not in text, text
