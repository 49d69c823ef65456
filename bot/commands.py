"""Slash commands: the payload turned into a validated query model, and the answers shaped.

Policy: nothing from the command text reaches a probe until it has been parsed here. ``/job``
ids go through :func:`probes.ids.split_job_ref` (plain SLURM ids or Kubernetes names only);
anything else is a :class:`bot.errors.UsageError`, answered ephemerally, and nothing runs.

    /jobs                 every bucket
    /jobs rl|sft|datagen|eval|other
    /jobs help, /job help usage
    /job <id>             the job in depth (searched in every reporting cluster)
    /job <cluster>:<id>

The answers themselves are shaped in :mod:`bot.messages`.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from bot.errors import UsageError
from probes.errors import InvalidJobIdError
from probes.ids import split_job_ref
from report.models import Bucket

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
    """The user's word, shortened and quoted; backticks would end the code span. The whole
    error is escaped for mrkdwn where it is sent (bot.messages.error_text), not here."""
    clean = word.replace("`", "'")
    return f"`{clean[:40]}{'…' if len(clean) > 40 else ''}`"
