"""Slash commands: the payload turned into a validated query model, and the answers shaped.

Policy: nothing from the command text reaches a probe until it has been parsed here. ``/job``
ids go through :func:`probes.ids.split_job_ref` (plain SLURM ids or Kubernetes names only);
anything else is a :class:`bot.errors.UsageError`, answered ephemerally, and nothing runs.

    /jobs                 every bucket
    /jobs rl|sft|datagen|eval|other
    /jobs help, /job help usage
    /job <id>             the job in depth (searched in every reporting cluster)
    /job <cluster>:<id>

Answers are code-block tables cut to Slack's limits (3,000 characters a section) and at most
five messages, because a ``response_url`` takes no more; the header says how old the sweep is
and whether it ran without history (Redis down).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from bot.errors import UsageError
from probes.errors import InvalidJobIdError
from probes.ids import split_job_ref
from report.chunks import slack_messages
from report.models import Bucket
from report.render import render_tables

if TYPE_CHECKING:
    from bot.sweep import SweepResult

BUCKETS: tuple[str, ...] = get_args(Bucket)

USAGE = (
    "*Usage*\n"
    "`/jobs` every job, one table per bucket\n"
    "`/jobs rl` (or `sft`, `datagen`, `eval`, `other`) one bucket\n"
    "`/job <id>` one job in depth, with a chart of its metric history\n"
    "`/job <cluster>:<id>` when the id exists on several clusters\n"
    "Ids are SLURM ids (`12345`, `12345_7`, `12345+1`) or Kubernetes job names."
)


class SlashPayload(BaseModel):
    """The fields of a slash-command payload the bot reads (Slack sends more)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    command: str
    text: str = ""
    user_id: str
    channel_id: str | None = None
    team_id: str | None = None
    response_url: str | None = None


class _Query(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HelpQuery(_Query):
    kind: Literal["help"] = "help"


class JobsQuery(_Query):
    kind: Literal["jobs"] = "jobs"
    bucket: Bucket | None = None


class JobQuery(_Query):
    kind: Literal["job"] = "job"
    cluster: str | None = None
    job_id: str

    @property
    def ref(self) -> str:
        return f"{self.cluster}:{self.job_id}" if self.cluster else self.job_id


Query = HelpQuery | JobsQuery | JobQuery


def parse_command(command: str, text: str) -> Query:
    """Parse ``/jobs`` or ``/job`` with its argument text; raise ``UsageError`` if invalid."""
    args = text.split()
    if command == "/jobs":
        return _parse_jobs(args)
    if command == "/job":
        return _parse_job(args)
    raise UsageError(f"unknown command {command!r}; try `/jobs help`")


def _parse_jobs(args: list[str]) -> Query:
    if not args:
        return JobsQuery()
    if len(args) > 1:
        raise UsageError("`/jobs` takes at most one word: a bucket or `help`")
    word = args[0].lower()
    if word == "help":
        return HelpQuery()
    if word in BUCKETS:
        return JobsQuery.model_validate({"bucket": word})
    raise UsageError(f"unknown bucket {_shown(args[0])}; choose one of {', '.join(BUCKETS)}")


def _parse_job(args: list[str]) -> Query:
    if not args:
        raise UsageError("`/job` needs a job id, e.g. `/job 12345` or `/job alpha:12345`")
    if args[0].lower() == "help" and len(args) == 1:
        return HelpQuery()
    try:
        cluster, job_id = split_job_ref(args[0])
    except InvalidJobIdError as exc:
        raise UsageError(
            f"{_shown(args[0])} is not a job id: use digits (optionally `_N` or `+N`), "
            "a Kubernetes job name, or `<cluster>:<id>`"
        ) from exc
    if len(args) > 1:
        raise UsageError("`/job` takes exactly one job id")
    return JobQuery(cluster=cluster, job_id=job_id)


def _shown(word: str) -> str:
    """The user's word, shortened, defanged so it cannot break the reply or ping anyone.

    Backticks would end the code span; ``<`` and ``>`` would turn ``<!channel>`` or
    ``<@U…>`` into a mention, so they are written as the entities Slack itself sends. An
    ``&`` is left alone: text from Slack already carries ``&lt;``-style entities.
    """
    clean = word.replace("`", "'")
    cut = clean[:40].replace("<", "&lt;").replace(">", "&gt;")
    return f"`{cut}{'…' if len(clean) > 40 else ''}`"


# -- shaping answers ---------------------------------------------------------------------------

MAX_RESPONSES = 5
"""Slack accepts at most five posts to one ``response_url``."""
SECTION_LIMIT = 2900
"""Characters of code per section block (Slack's limit is 3,000 including the fences)."""


@dataclass(frozen=True)
class Reply:
    """One message to send: fallback text plus Block Kit blocks."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)


def sweep_header(result: SweepResult, *, age_s: float | None) -> str:
    """``Jobs at 16:00:05Z · cached 42 s ago · beta UNREACHABLE (...)`` plus a degraded note."""
    stamp = result.report.generated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    parts = [f"Jobs at {stamp}"]
    parts.append(f"cached {age_s:.0f} s ago" if age_s is not None
                 else f"live sweep, {result.duration_s:.1f} s")
    for cluster in result.report.clusters:
        if cluster.status == "unreachable":
            parts.append(f"{cluster.name} UNREACHABLE ({cluster.detail or 'no reason given'})")
    header = " · ".join(parts)
    if result.degraded:
        header += f"\n⚠️ {result.degraded}"
    return header


def code_blocks(text: str, *, limit: int = SECTION_LIMIT) -> list[dict[str, Any]]:
    """``text`` as code-block sections, split on line boundaries to fit Slack's limit."""
    chunks: list[list[str]] = [[]]
    size = 0
    for line in text.splitlines():
        if size + len(line) + 1 > limit and chunks[-1]:
            chunks.append([])
            size = 0
        chunks[-1].append(line[:limit])
        size += len(line) + 1
    fence = "```"
    texts = [f"{fence}\n" + "\n".join(c) + f"\n{fence}" for c in chunks if c]
    return [{"type": "section", "text": {"type": "mrkdwn", "text": t}} for t in texts]


def jobs_messages(
    result: SweepResult, *, bucket: str | None, age_s: float | None, width: int
) -> list[Reply]:
    """The ``/jobs`` answer: code-block tables, split to Slack's limits, at most five messages."""
    report, details = result.report, result.details
    if bucket is not None:
        report = report.model_copy(update={"jobs": [j for j in report.jobs if j.bucket == bucket]})
        details = {k: d for k, d in details.items() if d.report.bucket == bucket}
    header = sweep_header(result, age_s=age_s)
    tables = render_tables(report, details, width=width)
    if not tables:
        what = f"No {bucket} jobs." if bucket else "No active or recent jobs."
        return [Reply(text=f"{header}\n{what}")]
    replies = [Reply(text=m.text, blocks=list(m.blocks))
               for m in slack_messages(tables, header=header)]
    if len(replies) > MAX_RESPONSES:
        left = len(replies) - (MAX_RESPONSES - 1)
        replies = [*replies[: MAX_RESPONSES - 1],
                   Reply(text=f"…{left} more message(s) not shown: ask for one bucket, "
                              "e.g. `/jobs rl`, or read the scheduled sweep thread.")]
    return replies
