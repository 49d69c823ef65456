"""Every message builder, fed hostile names, users, paths and log lines (hypothesis).

Whatever a cluster or a user wrote, no message may carry a bare ``<``/``>`` (a mention,
``<!channel>`` or a link) except the ``<@U…>`` mentions the bot built itself, every ``&`` is an
entity, code fences stay balanced, and Slack's size limits hold.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.alert_messages import collapse_message, job_end_dm, outcome_blocks
from bot.errors import JobNotFoundError
from bot.incidents import cleanup_line, failure_line
from bot.messages import (
    cancel_line,
    change_lines,
    changes_header,
    collapse_line,
    error_text,
    followup_messages,
    job_messages,
    jobs_messages,
    mention,
    share_button,
    shared_job_messages,
    sweep_header,
    sweep_parent,
    sweep_thread,
    text_message,
)
from probes.models import JobState
from report.changes import Change
from report.chunks import SlackMessage
from report.models import Recommendation
from report.render import render_text
from tests.bot.builders import T0, collapsing, detail, job, sweep_result

HOSTILE = ["<!channel>", "<!here>", "<https://evil.example/login|Re-authenticate>", "<@U0EVIL>",
           "```", "&amp;", "&lt;", "<#C0123>", "*bold*", "`", "\u200d", "&", ">", "<",
           "\u202e", "\u200b", "\x1b[2J", "\x9b31m", "\t"]
text = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12)),
                max_size=12).map("".join)
long_text = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40)),
                     max_size=30).map("".join)
BOT_MENTION = re.compile(r"<@U[A-Z0-9]+>")
ENTITY = re.compile(r"&(?:amp|lt|gt);")


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        if value.get("type") == "plain_text":
            return []  # plain_text is shown literally: Slack parses no markup in it
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def assert_safe(message: SlackMessage) -> None:
    """No markup from outside the bot, balanced fences, and within Slack's limits."""
    assert len(message.text) <= 4000
    assert len(message.blocks) <= 50
    total = 0
    for block in message.blocks:
        if block.get("type") == "section":
            assert len(block["text"]["text"]) <= 3000
            total += len(block["text"]["text"])
    assert total <= 10_000
    for piece in [message.text, *strings(message.blocks)]:
        bare = BOT_MENTION.sub("", piece)
        assert "<" not in bare and ">" not in bare, piece
        assert "&" not in ENTITY.sub("", bare), piece
        assert piece.count("```") % 2 == 0, piece
        assert inline_backticks_paired(piece), piece
        # No control or format character from outside (ESC, a bidi override, a zero-width
        # space): what Slack shows is what the text says (line breaks are the bot's own).
        assert not [ch for ch in piece if ch != "\n" and not ch.isprintable()], piece


FENCED = re.compile(r"```.*?```", re.DOTALL)


def inline_backticks_paired(piece: str) -> bool:
    """Outside code blocks, every line holds an even number of backticks: the bot's own
    spans (`alpha:42`, a path) only, never one from a name or a log line that would pair with
    one of them and turn the rest of the line into code."""
    return all(line.count("`") % 2 == 0 for line in FENCED.sub("", piece).split("\n"))


def hostile_detail(name: str, user: str, line: str, path: str) -> Any:
    base = collapsing()
    rec = Recommendation(action="cancel_and_salvage", why=f"collapse: {line}")
    report = base.report.model_copy(update={"name": name, "user": user, "log_path": path,
                                            "recommendation": rec, "trend": line})
    return base.model_copy(update={"report": report, "log_excerpt": f"{line}\n{line}\n",
                                   "faults": (line,), "workdir": path, "note": line})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=text, user=text, line=long_text, path=text, detail_text=text)
def test_every_builder_escapes_hostile_text(name: str, user: str, line: str, path: str,
                                            detail_text: str) -> None:
    """Sweep parent, thread, change replies and their lines, follow-ups, /jobs (filtered too),
    /job and its Share, errors, collapse DMs, job-end DMs and outcomes."""
    sick = hostile_detail(name, user, line, path)
    other = detail(job("4100", name + "-b", user=user, bucket="sft"))
    array = [detail(job(f"9000_{i}", name + "-arr", user=user, bucket="datagen")) for i in
             range(3)]  # grouped into one row named by the hostile name
    result = sweep_result([sick, other, *array], unreachable=("beta",), degraded=detail_text)
    result.report.clusters[-1] = result.report.clusters[-1].model_copy(
        update={"detail": detail_text})
    changes = [Change(kind=kind, cluster="alpha", job_id=job_id, name=name, state=state,
                      verdict="failed", why=line)
               for kind, job_id, state in (("failed", "4242", JobState.FAILED),
                                           ("finished", "4100", JobState.COMPLETED),
                                           ("stalled", "9000_1", JobState.RUNNING))]
    # The follow-ups as bot.incidents writes them (escaped for mrkdwn with the reply).
    done = sick.report.model_copy(update={"state": JobState.COMPLETED, "recommendation":
                                          Recommendation(action="cleanup", why=line)})
    followups = [failure_line(sick.report, line, "", path), cleanup_line(done) or ""]
    header = changes_header(changes, followups, since=T0, now=T0)
    try:  # the error /job gets for a job an unreachable cluster may hold
        result.find(None, "4999")
        missing = ""
    except JobNotFoundError as exc:
        missing = str(exc)
    messages: list[SlackMessage] = [
        sweep_parent(result, period_start=T0, now=T0, period_hours=24, sweeps=3),
        *sweep_thread(result, width=100),
        *sweep_thread(result, width=100, header=header, only={("alpha", "4242")}),
        # collapse lines as sent: raw lines of the sweep's change reply, escaped with it
        *sweep_thread(result, width=100, only=set(), header=changes_header([], [
            collapse_line(f"alpha:{name}", user, mapped=True, by_dm=False, name=name),
            collapse_line("alpha:4242", "alice", mapped=True, by_dm=True)], since=T0, now=T0)),
        text_message(cancel_line(f"alpha:{name}", user, path)),
        *[job_end_dm(change, sick, 2) for change in changes],
        *shared_job_messages(sick, header=sweep_header(result, age_s=None), sharer=user,
                             width=100),
        *jobs_messages(result, bucket=None, age_s=None, width=100, what="matching",
                       keep=lambda j: j.user == user),
        SlackMessage(text="x", blocks=[share_button(sick)]),
        *followup_messages(followups),
        *jobs_messages(result, bucket=None, age_s=None, width=100),
        *jobs_messages(result, bucket="eval", age_s=3.0, width=100),
        *job_messages(sick, header=sweep_header(result, age_s=None), width=100, note=line),
        SlackMessage(text=error_text(missing)),
        collapse_message(sick, can_cancel=True, evidence_path=path),
        collapse_message(sick, can_cancel=False, delivered_for="UALICE"),
        collapse_message(sick, can_cancel=True, delivered_for=user),
    ]
    alert = collapse_message(sick, can_cancel=True)
    messages.append(SlackMessage(text="x", blocks=outcome_blocks(
        alert.blocks, f"Kept running by {mention(user)} {mention('UALICE')}",
        keep_buttons=False)))
    for message in messages:
        assert_safe(message)


def test_a_log_fence_cannot_close_the_code_block() -> None:
    """A ``` inside a log line becomes a look-alike inside /job's code block."""
    sick = hostile_detail("rl-x", "alice", "step 3 ``` <!channel>", "/p")
    messages = job_messages(sick, header="h", width=100, note="n")
    code = [s for m in messages for s in strings(m.blocks) if s.startswith("```")]
    assert any("ˋˋˋ &lt;!channel&gt;" in s for s in code)
    assert all(s.count("```") == 2 for s in code)


def test_a_long_job_answer_is_split_between_rows_and_says_what_it_cut() -> None:
    """A /job with a huge log line stays within limits in several messages (at most five)."""
    sick = hostile_detail("rl-x", "alice", "x" * 30_000, "/p")
    messages = job_messages(sick, header="h", width=100, note="n")
    assert 1 < len(messages) <= 5
    for message in messages:
        assert_safe(message)
    assert "cut" in messages[-1].text or sum(
        len(s) for m in messages for s in strings(m.blocks)) > 26_000


def test_entities_are_never_torn_where_long_text_is_split() -> None:
    """Long runs of ``<``/``&`` in a header, a log line and follow-ups split into pieces that
    are each within limits and made only of whole entities."""
    sick = hostile_detail("rl-x", "alice", "<&>" * 3000, "/p")
    result = sweep_result([sick], degraded="<!channel>&" * 900)
    messages = [*job_messages(sick, header=sweep_header(result, age_s=None), width=100,
                              note="n"),
                *followup_messages(["<!here>&" * 2000]),
                *jobs_messages(result, bucket=None, age_s=None, width=100)]
    assert len(messages) > 3
    for message in messages:
        assert_safe(message)


def test_job_answer_never_breaks_a_box_across_blocks() -> None:
    """Every code block of a long ``/job`` answer holds whole boxes only (top and bottom rule
    in the same block), even when one row is taller than a block."""
    sick = hostile_detail("rl-" + "n" * 4000, "alice", "step 1 " * 800, "/p")
    messages = job_messages(sick, header="h", width=100, note="n")
    code = [s for m in messages for s in strings(m.blocks) if s.startswith("```")]
    assert len(code) > 2
    for block in code:
        lines = block.split("\n")[1:-1]
        tops = [i for i, line in enumerate(lines) if line.startswith("┌")]
        bottoms = [i for i, line in enumerate(lines) if line.startswith("└")]
        assert len(tops) == len(bottoms), block
        assert all(t < b for t, b in zip(tops, bottoms, strict=True)), block
        inside = any(line.startswith(("│", "├")) for line in lines)
        assert not inside or tops, block


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=text, user=text, line=long_text, cluster_user=text)
def test_home_view_escapes_hostile_text(name: str, user: str, line: str,
                                        cluster_user: str) -> None:
    """The App Home view (bot/home.py, built from bot.messages' pieces): the user's own jobs
    and episodes with hostile names and refs, within a Home view's 100 blocks."""
    from bot.config import Config, SlackSection
    from bot.home import home_view

    sick = hostile_detail(name, cluster_user, line, "/p")
    mine = [sick, *[detail(job(f"9000_{i}", name, user=cluster_user)) for i in range(3)]]
    result = sweep_result(mine, degraded=line)
    config = Config(slack=SlackSection(owners={cluster_user: "UALICE"} if cluster_user else {}))
    episodes = [{"cluster": name, "job_id": user, "state": "open", "opened_at": line,
                 "first_step": line},
                {"cluster": user, "job_id": name, "action": "snooze",
                 "snoozed_until": "2099-01-01T00:00:00+00:00"}]
    view = home_view(result, "UALICE", config, age_s=None, episodes=episodes, now=T0)
    blocks = view["blocks"]
    assert len(blocks) <= 100
    for start in range(0, len(blocks), 50):
        assert_safe(SlackMessage(text="home", blocks=blocks[start:start + 50]))


@pytest.mark.parametrize("hostile", ["`", "``", "a`b", "```", "`<!channel>`"])
def test_a_backtick_cannot_close_an_inline_code_span(hostile: str) -> None:
    """A path or name holding a backtick (found by the fuzz above: a path of one backtick
    made ```` ``` ````) stays inside its inline span as a look-alike."""
    for line in (cancel_line(f"alpha:{hostile}", "alice", hostile),
                 collapse_line(f"alpha:{hostile}", "alice", mapped=True, by_dm=True)):
        assert line.count("`") % 2 == 0, line
        assert "```" not in line
        assert "ˋ" in line


def test_a_backtick_in_a_name_or_fault_never_pairs_with_the_bots_spans() -> None:
    """Replayed on the real SLURM: a job named ``sft-odd`tick`` that died on ``ValueError: bad
    path `/data/x``. Its job-end DM read ``*sft-odd`tick* `alpha:1364` ended FAILED.`` (the
    name's backtick opened a span the id's closed), the thread's failure line turned half its
    text into code, and the parent and the change lines carried the bare backtick. Every
    such text shows the look-alike instead, outside code as inside."""
    name, fault = "sft-odd`tick", "traceback: ValueError: bad path `/data/x"
    failed = hostile_detail(name, "alice", fault, "/p")
    failed = failed.model_copy(update={"report": failed.report.model_copy(update={
        "state": JobState.FAILED, "verdict": "failed", "bucket": "sft",
        "recommendation": Recommendation(action="diagnose", why=f"dated entry: {fault}")})})
    done = failed.report.model_copy(update={
        "job_id": "4243", "state": JobState.COMPLETED, "verdict": "done",
        "recommendation": Recommendation(action="cleanup", why="sft-job-cleanup: rm `x")})
    result = sweep_result([failed, detail(done)])
    change = Change(kind="failed", cluster="alpha", job_id=failed.report.job_id, name=name,
                    why=fault, state=JobState.FAILED, verdict="failed")
    lines = [failure_line(failed.report, fault, "", "/inc/`odd.json"), cleanup_line(done)]
    assert None not in lines
    header = changes_header([change], [line for line in lines if line], since=None, now=T0)
    messages = [
        job_end_dm(change, failed),
        collapse_message(failed, can_cancel=True),
        sweep_parent(result, period_start=T0, now=T0, period_hours=24, sweeps=1),
        *sweep_thread(result, width=100, header=header),
        *followup_messages([line for line in lines if line]),
        *job_messages(failed, header="h", width=100, note="n"),
    ]
    for message in messages:
        assert_safe(message)
        for piece in [message.text, *strings(message.blocks)]:
            assert "odd`tick" not in piece and "`/data" not in piece, piece
    shown = "\n".join(s for m in messages for s in strings(m.blocks))
    assert "sft-oddˋtick" in shown and "`alpha:4242`" in shown


def test_a_cluster_read_in_part_says_so_in_the_header() -> None:
    """A Kubernetes cluster whose JobSets were refused (403) is ok with a detail: the Slack
    header says what was not read, as the text header does (it said nothing: the Jobs shown
    looked like the whole namespace)."""
    base = sweep_result([], clusters=("beta",))
    beta = base.report.clusters[0].model_copy(update={
        "detail": "JobSets not listed: list jobsets: HTTP 403 Forbidden"})
    result = dataclasses.replace(base, report=base.report.model_copy(
        update={"clusters": [beta]}))
    assert "beta ok (JobSets not listed: list jobsets: HTTP 403 Forbidden)" in sweep_header(
        result, age_s=None)


def test_a_replayed_clusters_provenance_is_no_trouble_in_the_headers() -> None:
    """Review of 89d74d5: a replay cluster is ok with a detail saying where it was recorded
    from; that is no partial read. The headers read 'snap ok' as before, and the period's
    parent lists no '⚠️ snap ok (recorded ...)' line (it did, on every sweep of a replay,
    and the text header of 'jobtables demo' grew the recording's provenance)."""
    base = sweep_result([], clusters=("snap",))
    snap = base.report.clusters[0].model_copy(update={
        "kind": "replay", "detail": "recorded 2026-11-30T16:00:00+00:00 from alpha"})
    result = dataclasses.replace(base, report=base.report.model_copy(
        update={"clusters": [snap]}))
    header = sweep_header(result, age_s=None)
    assert "recorded" not in header, header
    parent = sweep_parent(result, period_start=T0, now=T0, sweeps=1, period_hours=24).text
    assert "⚠️" not in parent and "recorded" not in parent, parent
    assert render_text(result.report, {}).splitlines()[0].endswith(" · snap ok")


LEAKY_DETAILS = [  # (an unreachable cluster's error text, what Slack must not show)
    ("redis get: Error 111 connecting to 10.2.0.7:6380. Connect call failed ('10.2.0.7', 6380).",
     ["10.2.0.7", "6380"]),
    ("cannot connect to rediss://jobtables:s3cret-pw@redis.internal:6380/0",
     ["s3cret-pw", "redis.internal", "jobtables:"]),
    ("cannot read client key /etc/jobtables/keys/id_ed25519: Permission denied",
     ["/etc/jobtables", "id_ed25519"]),
    ("kubeconfig /home/ops/.kube/prod-config: context 'beta' not found",
     ["/home/ops", "prod-config"]),
    ("ssh: connect to login01.hpc.corp.example:2222 timed out", ["login01.hpc", "2222"]),
    ("Host key is not trusted for host [fd00::12]:22", ["fd00::12"]),
    ("probe error: RuntimeError('x')\nTraceback (most recent call last):\n"
     '  File "/opt/jobtables/probes/slurm/probe.py", line 12, in collect', ["Traceback", "/opt"]),
]


@pytest.mark.parametrize(("text", "secrets"), LEAKY_DETAILS)
def test_channel_shows_an_unreachable_cluster_without_internal_detail(
        text: str, secrets: list[str]) -> None:
    """The channel parent and a /jobs header name the cluster and say unreachable with a
    short reason; an address, URL, credentials path or traceback in the error stays out."""
    result = sweep_result([detail(job("4100", "rl-a"))], unreachable=("beta",))
    result.report.clusters[-1] = result.report.clusters[-1].model_copy(update={"detail": text})
    parent = sweep_parent(result, period_start=T0, now=T0, period_hours=24, sweeps=1)
    for shown in (parent.text + str(parent.blocks), sweep_header(result, age_s=None)):
        assert "beta UNREACHABLE (" in shown
        for secret in secrets:
            assert secret not in shown, (secret, shown)


def test_a_mass_change_s_reasons_are_counted_by_kind_not_by_figure() -> None:
    """150 runs of one sweep turn to a warning at once (a shared config change), each with
    its own grad norm in its why, and 10 with dead rollouts: the folded line had counted
    exact whys, '11 grad_norm 1.44 ... · 9 grad_norm 1.47 ... · 8 grad_norm 1.42 ...' (28 of
    160 accounted for, the rest unsaid). Whys differing only in their figures are one reason,
    counted whole, so the counts add up to the jobs."""
    def warned(i: int, why: str) -> Change:
        return Change(kind="warning", cluster="alpha", job_id=str(5000 + i),
                      name=f"rl-sweep-{i:03d}", state=JobState.RUNNING, verdict="warning",
                      why=why)

    changes = [warned(i, f"grad_norm {1.3 + (i % 40) / 100:.2f} >1.0 for 2+ steps: collapse "
                         "risk") for i in range(150)]
    changes += [warned(150 + i, "dead rollouts: reward flat at 0 over the window")
                for i in range(10)]
    [line] = change_lines(changes)
    head, _, why = line.partition(" — ")
    assert head == "• warning: 160 jobs on alpha (rl-sweep-000, rl-sweep-001, rl-sweep-002 " \
        "+157 more)"
    assert why == ("150 like grad_norm 1.30 >1.0 for 2+ steps: collapse risk · "
                   "10 dead rollouts: reward flat at 0 over the window"), why
