"""A job name holding mrkdwn's formatting characters (``*`` ``_`` ``~``) never mixes with the
bot's own bold: the collapse alert's headline, a batched alert's entries, the job-end DM, the
deep-probe offer and verdict, a grid table's title.

mrkdwn has no escape for them: ``*rl*grpo~v2_*`` as the bot wrote it bolded ``rl`` and left
``grpo~v2_*`` trailing, and ``*_tmp_run*`` turned italic. Such a name is now shown in an inline
code span, every character as it is; a plain name stays bold.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from bot.alert_messages import collapse_batch_messages, collapse_message, job_end_dm
from bot.deep_probe import offer_blocks, verdict_blocks
from probes.models import JobState
from report.changes import Change
from report.chunks import SlackMessage, slack_messages
from report.models import DeepProbe, GridRollup, Report
from report.render import render_tables
from tests.bot.builders import T0, collapsing, detail, job
from tests.bot.conftest import make_config

ODD = ["rl*grpo~v2_", "_tmp_run_", "a*b", "~strike~", " padded "]
SPAN = re.compile(r"`[^`]*`")


def texts(blocks: list[dict[str, Any]]) -> list[str]:
    out = []
    for block in blocks:
        for obj in [block.get("text"), *block.get("elements", [])]:
            if isinstance(obj, dict) and obj.get("type") == "mrkdwn":
                out.append(obj["text"])
    return out


def shown_whole(text: str, name: str) -> bool:
    """``name`` appears in an inline code span, and outside the spans each line's bold
    markers pair up and no ``_`` or ``~`` is left (nothing of the name formats)."""
    spans = [s.strip("`") for s in SPAN.findall(text)]
    if name not in spans:
        return False
    for line in SPAN.sub("", text.replace("```", "")).splitlines():
        if line.count("*") % 2 or "~" in line or re.search(r"(^|\W)_|_(\W|$)", line):
            return False
    return True


def odd_detail(name: str) -> Any:
    sick = collapsing()
    return sick.model_copy(update={"report": sick.report.model_copy(update={"name": name})})


@pytest.mark.parametrize("name", ODD)
def test_a_collapse_alert_and_a_batched_one_show_the_name_whole(name: str) -> None:
    """The alert's headline and a batched alert's entry quote the name in a code span."""
    sick = odd_detail(name)
    one = collapse_message(sick, can_cancel=True)
    assert shown_whole(texts(one.blocks)[0], name), texts(one.blocks)[0]
    other = collapsing("4243")
    ((batch, _),) = collapse_batch_messages([(sick, True, None), (other, True, None)])
    entry = next(t for t in texts(batch.blocks) if "alpha:4242" in t)
    assert shown_whole(entry, name), entry


@pytest.mark.parametrize("name", ODD)
@pytest.mark.parametrize(("kind", "state"), [("failed", JobState.FAILED),
                                             ("finished", JobState.COMPLETED),
                                             ("stalled", JobState.RUNNING)])
def test_a_job_end_dm_shows_the_name_whole(name: str, kind: str, state: JobState) -> None:
    """Each kind of job-end DM heads with the name in a code span."""
    ended = detail(job("4300", name, state=state))
    change = Change(kind=kind, cluster="alpha", job_id="4300", name=name, state=state,
                    verdict="failed", why="x")
    message: SlackMessage = job_end_dm(change, ended)
    head = message.text.splitlines()[0]
    assert shown_whole(head, name), head


@pytest.mark.parametrize("name", ODD)
def test_the_deep_probe_offer_and_verdict_show_the_name_whole(name: str, tmp_path: Any) -> None:
    """The new-run offer and the verdict head quote the name in a code span."""
    sick = odd_detail(name)
    offer = texts(offer_blocks(sick))[0]
    assert shown_whole(offer.splitlines()[0], name), offer
    probe = DeepProbe(verdict="NO-KILL", reasons=["fine"], read={})
    probed = sick.model_copy(update={"report": sick.report.model_copy(
        update={"deep_probe": probe})})
    head = texts(verdict_blocks(probed, make_config("p", tmp_path)))[0]
    assert shown_whole(head.splitlines()[0], name), head


def test_a_grid_title_holding_a_star_is_not_bolded_apart() -> None:
    """An SFT grid named ``sft*lr`` titles its table section in a code span."""
    grid = GridRollup(grid="sft*lr_grid", running=1, pending_unique=0, done=0, cells=[],
                      long_pole=None)
    report = Report(generated_at=T0, clusters=[], jobs=[job("5000", "sft*lr_grid-a",
                                                           bucket="sft")], grid=[grid])
    messages = slack_messages(render_tables(report, {}, width=100))
    title = next(t for m in messages for t in texts(m.blocks) if "SFT grid" in t)
    assert shown_whole(title.split("```")[0], title.split("```")[0].strip().strip("`"))
    assert "sft*lr_grid" in title.split("```")[0]


def test_a_plain_name_stays_bold() -> None:
    """A name with nothing mrkdwn formats with is bold as before."""
    assert collapse_message(collapsing(), can_cancel=True).blocks[0]["text"]["text"].startswith(
        "*Collapse on* `alpha:4242` *rl-grpo-qwen-7b*")
