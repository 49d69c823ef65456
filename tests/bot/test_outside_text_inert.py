"""Cluster text outside the bot's code blocks cannot format itself in Slack (CONTRACT §7).

427976e set job names in the heads off in code spans; the rest of the outside text beside the
bot's mrkdwn still formatted: ``*Recommendation:* … {why}`` with a why quoting ``_tmp_run_``
showed it italic (``*all*`` bold), and so did an owner, an evidence line's why, a change
line, a failure follow-up's diagnosis, a deep-probe reason and an unreachable cluster's reason
in a header.
mrkdwn has no escape for ``*`` ``_`` ``~``: each word opening or closing with one is now in a
code span (``grad_norm`` stays plain: mrkdwn formats from a word's edge only)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from bot.alert_messages import collapse_batch_messages, collapse_message, job_end_dm
from bot.deep_probe import verdict_blocks
from bot.incidents import cleanup_line, failure_line
from bot.messages import changes_header, followup_messages, jobs_messages, sweep_parent
from probes.models import JobState
from report.changes import Change
from report.chunks import slack_messages
from report.models import DeepProbe, Recommendation
from tests.bot.builders import T0, collapsing, detail, job, sweep_result
from tests.bot.conftest import Harness, make_config

WHY = "salvage _tmp_run_ then *all* ranks and ~old~ logs (grad_norm up)"
USER = "_svc_"
SPAN = re.compile(r"`[^`\n]*`")
BOT_BOLD = re.compile(r"(?:(?<=\s)|^)\*[^*_~\s][^*_~\n]*\*(?=[\s:.,]|$)")
"""The bot's own bold (``*Recommendation:*``, a table title): no marker inside it."""


def formats_nothing(text: str) -> bool:
    """Outside the code blocks and spans, no line holds ``*`` ``_`` or ``~`` at a word's edge
    beyond the bot's own bold and italic: nothing of the outside text can format."""
    outside = re.sub(r"```.*?```", "", text, flags=re.S)
    if "*all*" in SPAN.sub("", outside):  # WHY's bold word would pass for the bot's own
        return False
    for line in SPAN.sub("", outside).splitlines():
        if re.fullmatch(r"_[^_]+_", line):  # the bot's own italic footer line
            continue
        bare = BOT_BOLD.sub("", line)
        if re.search(r"(^|[\s(\[{'\"])[*_~]|[*_~]($|[\s)\]}'\".,:;!?])", bare):
            return False
    return True


def texts(blocks: list[dict[str, Any]]) -> list[str]:
    out = []
    for block in blocks:
        for obj in [block.get("text"), *block.get("elements", [])]:
            if isinstance(obj, dict) and obj.get("type") == "mrkdwn":
                out.append(obj["text"])
    return out


def hostile() -> Any:
    sick = collapsing(user=USER)
    ev = [e.model_copy(update={"why": WHY}) for e in sick.evidence]
    return sick.model_copy(update={"evidence": ev, "report": sick.report.model_copy(update={
        "recommendation": Recommendation(action="cancel_and_salvage", why=WHY)})})


def test_a_collapse_alert_and_a_batched_one() -> None:
    sick = hostile()
    for text in texts(collapse_message(sick, can_cancel=True).blocks):
        assert formats_nothing(text), text
    ((batch, _),) = collapse_batch_messages([(sick, True, None),
                                             (collapsing("4243"), True, None)])
    for text in texts(batch.blocks):
        assert formats_nothing(text), text
    assert "`_tmp_run_`" in "".join(texts(batch.blocks))


@pytest.mark.parametrize(("kind", "state"), [("failed", JobState.FAILED),
                                             ("finished", JobState.COMPLETED),
                                             ("stalled", JobState.RUNNING)])
def test_a_job_end_dm_s_recommendation(kind: str, state: JobState) -> None:
    rec = Recommendation(action="cleanup", why=WHY)
    ended = detail(job("4300", "rl-a", state=state, recommendation=rec))
    change = Change(kind=kind, cluster="alpha", job_id="4300", name="rl-a", state=state,
                    verdict="failed", why="x")
    text = job_end_dm(change, ended).text
    assert formats_nothing(text) and "`_tmp_run_`" in text, text


def test_the_change_reply_and_its_follow_ups() -> None:
    change = Change(kind="failed", cluster="alpha", job_id="4300", name="_tmp_run_",
                    state=JobState.FAILED, verdict="failed", why=WHY)
    failed = job("4300", "_tmp_run_", state="FAILED")
    done = job("4301", "rl~a~", state="COMPLETED",
               recommendation=Recommendation(action="cleanup", why=WHY))
    extra = [failure_line(failed, WHY, "", "/inc/x.json"), cleanup_line(done) or ""]
    header = changes_header([change], extra, since=T0, now=T0)
    for message in slack_messages([], header=header):
        for text in texts(message.blocks):
            assert formats_nothing(text), text
    for message in followup_messages(extra):
        assert formats_nothing(message.text), message.text
    assert "`/inc/x.json`" in followup_messages(extra)[0].text  # the bot's own span kept


def test_an_unreachable_cluster_s_reason_in_the_headers() -> None:
    result = sweep_result([detail(job("1", "rl-a"))], unreachable=("beta",))
    result.report.clusters[1] = result.report.clusters[1].model_copy(
        update={"detail": "key /home/_ops_/id_x unreadable: *denied*"})
    for message in jobs_messages(result, bucket=None, age_s=None, width=100):
        for text in texts(message.blocks):
            assert formats_nothing(text), text
    parent = sweep_parent(result, period_start=T0, now=T0, sweeps=1, period_hours=24)
    assert formats_nothing(parent.text), parent.text


def test_a_deep_probe_verdict_s_reasons(tmp_path: Any) -> None:
    probe = DeepProbe(verdict="NO-KILL", reasons=[WHY], read={})
    sick = collapsing()
    probed = sick.model_copy(update={"report": sick.report.model_copy(
        update={"deep_probe": probe})})
    for text in texts(verdict_blocks(probed, make_config("p", tmp_path))):
        assert formats_nothing(text), text


async def test_job_through_the_bot(harness: Harness) -> None:
    """`/job 4242` through the fake Slack: the recommendation's why shows no formatting."""
    harness.sweeper.make = lambda: sweep_result([hostile()], at=harness.clock())
    _, hook = await harness.command("/job", "alpha:4242")
    (reply,) = await harness.slack.wait_for(hook)
    for text in texts(reply.params["blocks"]):
        assert formats_nothing(text), text


async def test_a_not_found_error_quoting_a_cluster_s_reason(harness: Harness) -> None:
    """`/job 4242` when the only cluster that may hold it is unreachable: the ephemeral error
    quotes its reason, whose ``*denied*`` shows no bold."""
    result = sweep_result([], at=harness.clock(), clusters=(), unreachable=("beta",))
    result.report.clusters[0] = result.report.clusters[0].model_copy(
        update={"detail": "key /home/_ops_/id unreadable: *denied*"})
    harness.sweeper.make = lambda: result
    _, hook = await harness.command("/job", "4242")
    (reply,) = await harness.slack.wait_for(hook)
    text = reply.params["text"]
    assert "beta" in text and "`*denied*)`" in text and formats_nothing(text), text


def test_a_batched_deep_probe_offer() -> None:
    """An owner's several offers in one message: each run's why formats nothing, and no
    mention or link of the cluster's is live."""
    from bot.deep_probe_blocks import offers_blocks

    runs = [detail(job(str(5000 + n), f"rl-<!channel>-{n}", flags=("deep-probe",),
                       recommendation=Recommendation(action="deep_probe", why=WHY)))
            for n in range(3)]
    (blocks,) = offers_blocks([(run, ()) for run in runs])
    for text in texts(blocks):
        assert formats_nothing(text), text
        assert "<!" not in text
