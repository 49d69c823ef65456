"""Slash-command parsing: a table of accepted and refused inputs, and answer shaping."""

from __future__ import annotations

import pytest

from bot.commands import (
    HelpQuery,
    JobQuery,
    JobsQuery,
    NotifyQuery,
    job_filter,
    parse_command,
)
from bot.config import Config
from bot.errors import UsageError
from bot.messages import MAX_RESPONSES, jobs_messages
from probes.config import ReplayCluster
from report.chunks import text_sections
from tests.bot.builders import blocks_text, detail, job, sweep_result


@pytest.mark.parametrize(
    ("command", "text", "expected"),
    [
        ("/jobs", "", JobsQuery()),
        ("/jobs", "  ", JobsQuery()),
        ("/jobs", "rl", JobsQuery(bucket="rl")),
        ("/jobs", "SFT", JobsQuery(bucket="sft")),
        ("/jobs", "other", JobsQuery(bucket="other")),
        ("/jobs", "help", HelpQuery()),
        ("/jobs", "mine", JobsQuery(mine=True)),
        ("/jobs", "rl mine", JobsQuery(bucket="rl", mine=True)),
        ("/jobs", "<@U0BOB|bob>", JobsQuery(slack_user="U0BOB")),
        ("/jobs", "@alice cluster:alpha", JobsQuery(cluster_user="alice", cluster="alpha")),
        ("/jobs", "notify off", NotifyQuery(on=False)),
        ("/jobs", "NOTIFY on", NotifyQuery(on=True)),
        ("/job", "help", HelpQuery()),
        ("/job", "12345", JobQuery(job_id="12345")),
        ("/job", "12345_7", JobQuery(job_id="12345_7")),
        ("/job", "12345+1", JobQuery(job_id="12345+1")),
        ("/job", "alpha:12345", JobQuery(cluster="alpha", job_id="12345")),
        ("/job", "beta:rl-grpo-run-3", JobQuery(cluster="beta", job_id="rl-grpo-run-3")),
        # a Job's name is a DNS-1123 subdomain (dots allowed, as in a model's version)
        ("/job", "beta:rl-qwen2.5-7b-grpo", JobQuery(cluster="beta",
                                                     job_id="rl-qwen2.5-7b-grpo")),
        ("/job", "sft-llama-3.1-8b.v2", JobQuery(job_id="sft-llama-3.1-8b.v2")),
        # a KubeRay RayJob sharing a Job's name (kubectl's form)
        ("/job", "beta:rayjob/rl-grpo-verl", JobQuery(cluster="beta",
                                                      job_id="rayjob/rl-grpo-verl")),
    ],
)
def test_accepted(command: str, text: str, expected: object) -> None:
    """Valid commands parse into their query model."""
    assert parse_command(command, text) == expected


@pytest.mark.parametrize(
    ("command", "text", "message"),
    [
        ("/job", "", "needs a job id"),
        ("/job", "1;touch /tmp/x", "is not a job id"),
        ("/job", "$(reboot)", "is not a job id"),
        ("/job", "`id`", "is not a job id"),
        ("/job", "123 456", "exactly one job id"),
        ("/job", "12345_", "is not a job id"),         # near miss: array suffix without index
        ("/job", "Rl-Run", "is not a job id"),         # near miss: upper case is not a k8s name
        ("/job", "al pha:1", "exactly one"),           # near miss: space splits the ref
        ("/job", "a/b:1", "is not a job id"),          # bad cluster name
        ("/job", "x" * 64, "is not a job id"),         # 64 chars: one over the k8s limit
        ("/job", "a." + "x" * 62, "is not a job id"),  # dotted, one over the limit too
        ("/job", "rl..run", "is not a job id"),        # an empty DNS label
        ("/job", "rl.-run", "is not a job id"),        # a label ending in '-'
        ("/job", ".rl-run", "is not a job id"),
        ("/job", "rl-run.", "is not a job id"),
        ("/job", "jobset/rl.run", "is not a job id"),  # a JobSet's name has no dots
        ("/job", "rayjob/rl.run", "is not a job id"),  # nor a RayJob's (DNS-1035)
        ("/job", "rayjob/../x", "is not a job id"),
        ("/job", "rayjob/", "is not a job id"),
        ("/jobs", "gpu", "unknown bucket"),
        ("/jobs", "rl sft", "at most one word"),
        ("/jobs", "mine @bob", "at most one word"),
        ("/jobs", "cluster:a/b", "unknown bucket"),
        ("/jobs", "notify maybe", "notify on"),
        ("/deploy", "", "unknown command"),
    ],
)
def test_refused(command: str, text: str, message: str) -> None:
    """Invalid input is a UsageError with a short message; nothing is returned to run."""
    with pytest.raises(UsageError, match=message):
        parse_command(command, text)


def test_user_word_is_defanged_in_the_error() -> None:
    """Backticks in the user's text cannot break out of the error's code span."""
    with pytest.raises(UsageError) as caught:
        parse_command("/job", "`" + "a" * 80)
    shown = str(caught.value).split(" is not")[0]
    assert shown.count("`") == 2 and shown.endswith("…`")


def test_code_blocks_split_on_lines_within_the_limit() -> None:
    """Long text becomes several fenced sections, none over the limit, no line split."""
    text = "\n".join(f"line {i:04d} " + "x" * 80 for i in range(200))
    bodies = text_sections(text, max_chars=2900)
    assert len(bodies) > 1
    assert all(len(b) <= 3000 and b.startswith("```\n") and b.endswith("\n```") for b in bodies)
    assert "\n".join(b[4:-4] for b in bodies) == text


def test_many_tables_are_capped_at_five_replies() -> None:
    """More messages than a response_url accepts end in a note naming a narrower command."""
    jobs = [detail(job(str(i), f"{b}-run-{i:03d}-" + "y" * 30, bucket=b))
            for b in ("rl", "sft", "datagen", "eval", "other") for i in range(150)]
    replies = jobs_messages(sweep_result(jobs), bucket=None, age_s=None, width=100)
    assert len(replies) == MAX_RESPONSES
    assert "/jobs rl" in replies[-1].text


def test_empty_bucket_says_so() -> None:
    """A bucket with no jobs answers one line instead of an empty table."""
    replies = jobs_messages(sweep_result([detail(job("1", "rl-a"))]), bucket="eval",
                            age_s=3.0, width=100)
    assert len(replies) == 1 and "No eval jobs." in replies[0].text
    assert "cached 3 s ago" in replies[0].text


def test_unreachable_cluster_and_degraded_are_in_the_header() -> None:
    """The header names an unreachable cluster and the degraded reason."""
    result = sweep_result([detail(job("1", "rl-a"))], unreachable=("beta",),
                          degraded="degraded: no history (redis down)")
    (first, *_) = jobs_messages(result, bucket=None, age_s=None, width=100)
    assert "beta UNREACHABLE" in first.text + str(first.blocks)
    assert "degraded: no history" in first.text + str(first.blocks)


def two_clusters() -> Config:
    """``alice`` on alpha is UALICE; a different ``alice`` on beta is UOTHER."""
    return Config(clusters=(
        ReplayCluster(name="alpha", path="/a", owners={"alice": "UALICE"}),
        ReplayCluster(name="beta", path="/b", owners={"alice": "UOTHER"}),
    ))


def test_mine_uses_the_owner_mapped_on_each_jobs_own_cluster() -> None:
    """`/jobs mine` (and the Home tab) for UALICE: alice's job on alpha, not the other alice's
    job on beta, although both are named alice (bot.owners, per cluster)."""
    from bot.home import own_jobs

    config = two_clusters()
    here, there = job("1", "rl-a", cluster="alpha"), job("2", "rl-b", cluster="beta")
    keep = job_filter(JobsQuery(mine=True), "UALICE", config)
    assert keep(here) and not keep(there)
    other = job_filter(JobsQuery(slack_user="UOTHER"), "UALICE", config)
    assert other(there) and not other(here)
    result = sweep_result([detail(here), detail(there)], clusters=("alpha", "beta"))
    assert [j.job_id for j in own_jobs(result, "UALICE", config)] == ["1"]


def test_an_unmapped_mention_is_a_short_error_that_pings_nobody() -> None:
    """`/jobs <@U0EVIL>`: nobody maps to that id; the error names it without a mention."""
    query = parse_command("/jobs", "<@U0EVIL>")
    assert query == JobsQuery(slack_user="U0EVIL")
    with pytest.raises(UsageError) as caught:
        job_filter(query, "UALICE", two_clusters())  # type: ignore[arg-type]
    assert "`U0EVIL` is not mapped" in str(caught.value) and "<@" not in str(caught.value)


@pytest.mark.parametrize(("bucket", "shown"), [(None, True), ("sft", True), ("rl", False),
                                               ("datagen", False)])
def test_a_bucket_answer_shows_the_sft_grid_rollup_only_for_sft(bucket: str | None,
                                                                 shown: bool) -> None:
    """Replayed on the real SLURM: ``/jobs rl`` ended with the ``SFT grid …`` rollup of three
    SFT cells running beside the RL runs, below the RL table, in an answer that is to be the RL
    bucket only (CONTRACT §7). The grid belongs to the SFT bucket: ``/jobs``, ``/jobs sft``."""
    from bot.cached_render import View, render_view
    from bot.commands import parse_command
    from bot.store import encode_sweep
    from report.models import GridCell, GridRollup

    jobs = [detail(job("1", "rl-grpo-a")),
            *[detail(job(str(i), f"sft-grid-lr{i}", bucket="sft")) for i in (2, 3, 4)]]
    result = sweep_result(jobs)
    grid = GridRollup(grid="sft-grid", running=3, pending_unique=0, done=0, long_pole=None,
                      cells=[GridCell(cell=f"sft-grid-lr{i}", job_id=str(i), progress_pct=10.0,
                                      eta_s=None) for i in (2, 3, 4)])
    result.report.grid.append(grid)
    text = "/jobs" if bucket is None else f"/jobs {bucket}"
    query = parse_command("/jobs", text.removeprefix("/jobs").strip())
    assert isinstance(query, JobsQuery)
    live = "\n".join(blocks_text(m.blocks) for m in
                     jobs_messages(result, bucket=bucket, age_s=None, width=100))
    rendered = render_view(encode_sweep(result), {}, View(query=query, invoker="UALICE",
                                                          config=Config(), width=100))
    cached = "\n".join(t.title for t in rendered.tables)
    assert ("SFT grid sft-grid" in live) is shown, live
    assert ("SFT grid sft-grid" in cached) is shown, cached
