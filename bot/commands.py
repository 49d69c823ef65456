"""Slash commands: the payload turned into a validated query model, and the answers shaped.

Policy: nothing from the command text reaches a probe until it has been parsed here. ``/job``
ids go through :func:`probes.ids.split_job_ref` (plain SLURM ids or Kubernetes names only);
anything else is a :class:`bot.errors.UsageError`, answered ephemerally, and nothing runs.

    /jobs                 every bucket
    /jobs rl|sft|datagen|eval|other
    /jobs mine | @user | cluster:NAME   filtered (owners mapping), combinable with a bucket
    /jobs notify on|off   the invoker's job-end DMs
    /jobs help, /job help usage
    /job <id>             the job in depth (searched in every reporting cluster)
    /job <cluster>:<id>

The answers themselves are shaped in :mod:`bot.messages`. Which rows a filtered ``/jobs``
keeps is decided by :func:`job_filter`, through the one owner lookup (:mod:`bot.owners`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, field_validator

from bot.errors import UsageError
from bot.owners import mapped_slack_users, slack_owner
from probes.errors import InvalidJobIdError
from probes.ids import split_job_ref
from report.models import Bucket, JobReport

if TYPE_CHECKING:
    from bot.config import Config

BUCKETS: tuple[str, ...] = get_args(Bucket)

USAGE = (  # mrkdwn: a bare <id> is a link to Slack, even in a code span, so it is escaped
    "*Usage*\n"
    "`/jobs` every job, one table per bucket\n"
    "`/jobs rl` (or `sft`, `datagen`, `eval`, `other`) one bucket\n"
    "`/jobs mine`, `/jobs @user`, `/jobs cluster:NAME` only those jobs (with a bucket too)\n"
    "`/jobs notify on` (or `off`) DMs when your jobs fail, complete or stall (off until asked)\n"
    "`/job &lt;id&gt;` one job in depth, with a chart of its metric history\n"
    "`/job &lt;cluster&gt;:&lt;id&gt;` when the id exists on several clusters\n"
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

    @field_validator("text")
    @classmethod
    def _unescaped(cls, text: str) -> str:
        """Slack sends the text with ``&``, ``<``, ``>`` as entities (a mention picked in
        Slack, ``<@U…|name>``, comes as it is): undone once here, ``&amp;`` last, so the
        parser reads what the user typed and a reply quoting it is escaped only once."""
        if "&" not in text:
            return text
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


class _Query(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HelpQuery(_Query):
    kind: Literal["help"] = "help"


class JobsQuery(_Query):
    kind: Literal["jobs"] = "jobs"
    bucket: Bucket | None = None
    mine: bool = False
    slack_user: str | None = None
    """``/jobs @user`` with a Slack mention: that Slack user's jobs (owners mapping)."""
    cluster_user: str | None = None
    """``/jobs @alice`` without a mention: the cluster user ``alice``'s jobs."""
    cluster: str | None = None

    @property
    def filtered(self) -> bool:
        return bool(self.mine or self.slack_user or self.cluster_user or self.cluster)


class NotifyQuery(_Query):
    kind: Literal["notify"] = "notify"
    on: bool


class JobQuery(_Query):
    kind: Literal["job"] = "job"
    cluster: str | None = None
    job_id: str

    @property
    def ref(self) -> str:
        return f"{self.cluster}:{self.job_id}" if self.cluster else self.job_id


Query = HelpQuery | JobsQuery | JobQuery | NotifyQuery

_MENTION = re.compile(r"^<@(?P<id>[UW][A-Z0-9]{2,20})(?:\|[^>]*)?>$")
_CLUSTER_USER = re.compile(r"^@(?P<name>[a-z_][a-z0-9._-]{0,31})$", re.IGNORECASE)
_CLUSTER = re.compile(r"^cluster:(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,62})$", re.IGNORECASE)


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
    words = [a.lower() for a in args]
    if words == ["help"]:
        return HelpQuery()
    if words[0] == "notify":
        if words[1:] in (["on"], ["off"]):
            return NotifyQuery(on=words[1] == "on")
        raise UsageError("use `/jobs notify on` or `/jobs notify off`")
    fields: dict[str, Any] = {}
    for arg in args:
        key, value = _jobs_word(arg)
        if key in fields:
            raise UsageError("`/jobs` takes at most one word of each kind: a bucket, "
                             "`mine` or `@user`, and `cluster:NAME`")
        fields[key] = value
    if sum(k in fields for k in ("mine", "slack_user", "cluster_user")) > 1:
        raise UsageError("`/jobs` takes at most one word of each kind: `mine` or one `@user`")
    return JobsQuery.model_validate(fields)


def _jobs_word(arg: str) -> tuple[str, Any]:
    word = arg.lower()
    if word in BUCKETS:
        return "bucket", word
    if word == "mine":
        return "mine", True
    if (m := _MENTION.match(arg)) is not None:
        return "slack_user", m["id"]
    if (m := _CLUSTER_USER.match(arg)) is not None:
        return "cluster_user", m["name"]
    if (m := _CLUSTER.match(arg)) is not None:
        return "cluster", m["name"]
    raise UsageError(f"unknown bucket {_shown(arg)}; choose one of {', '.join(BUCKETS)}, "
                     "or `mine`, `@user`, `cluster:NAME`, `notify on|off`")


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


def job_filter(query: JobsQuery, invoker: str, config: Config) -> Callable[[JobReport], bool]:
    """Which rows a ``/jobs`` query keeps. People are matched through the per-cluster owner
    lookup (:func:`bot.owners.slack_owner`): a job is the invoker's when *its* cluster maps
    its user to the invoker's Slack id."""
    names = {c.name for c in config.clusters}
    if query.cluster is not None and query.cluster not in names:
        raise UsageError(f"no cluster named {_shown(query.cluster)}; configured: "
                         f"{', '.join(sorted(names)) or 'none'}")
    person = invoker if query.mine else query.slack_user
    if person is not None and person not in mapped_slack_users(config):
        whose = "You are" if query.mine else f"`{person}` is"  # no mention: nobody is pinged
        raise UsageError(f"{whose} not mapped to a cluster user: add the Slack id to "
                         "`owners` in the config")

    def keep(job: JobReport) -> bool:
        return ((query.bucket is None or job.bucket == query.bucket)
                and (query.cluster is None or job.cluster == query.cluster)
                and (query.cluster_user is None or job.user == query.cluster_user)
                and (person is None or slack_owner(config, job.cluster, job.user) == person))

    return keep
