"""The deep probe's read of one job: its row's facts and a bounded rollout sample.

Policy: ONE runner (one SSH connection) serves the whole probe: ``SlurmProbe.collect_one``
(squeue/sacct, the collector's log tail, checkpoints, trials, and for a TIMEOUT or COMPLETED
job its user's jobs, the successor candidates ``jobtables job`` reads too) and then the
rollout reader (``probes.remote.rollouts``, built by ``probes.remote.script.build_rollouts_script``)
run over it, and it is closed once at the end. Where to read is data, never a command line: the
trial tree the row counted (a trials dir the run's log names, found by the collector, alone;
else the cluster's ``trial_roots``), the configured rollout/validation dump directories
(placeholders ``{workdir} {name} {job_id} {user}``), and the dump directories verl and SkyRL
named in the log (``Dumped generations to ...``, ``Dumped eval data for ... to ...``; a
relative one is taken relative to the job's workdir; one outside it is read too, through the
reader's guard like every other: only the job user's own files, under a root that user could
list, for the log is the job's own text). A reader that fails (no ``python3``, unreadable
answer) leaves the probe with what the log printed; it is reported in ``skipped``, never
raised. The job's log tail is read whole
(``collect_one(whole_tail=True)``) for the completions and timings it printed, then cut to
the bounded excerpts every job keeps (``probes.logs.excerpt``) before the facts are returned.

A Kubernetes job (:func:`read_k8s_job`) is read through the API as a sweep reads it, its log
tail kept whole: the probe reads what the log printed (completions, timings, lengths); its
pods' files (trials, dumps) are out of reach, which the verdict's ``skipped`` says.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from probes.config import KubernetesCluster, ReadPlan, SlurmCluster
from probes.logs.excerpt import retain
from probes.models import JobFacts, LogFetch
from probes.remote.script import COLLECTOR_ARGV, build_rollouts_script
from probes.remote.stdio_pattern import expand_roots
from probes.rollouts import (
    DumpRole,
    RolloutFacts,
    dump_dirs_in_log,
    rollout_facts,
    unique,
)
from probes.slurm.parse import past_banner
from probes.slurm.probe import SlurmProbe
from probes.slurm.runner import NO_EXIT_STATUS
from probes.slurm.transport import CommandResult, Runner, RunnerFactory, make_runner

MAX_LOGGED_DIRS = 4
"""Dump directories taken from the log (the latest named ones)."""


class _Shared:
    """The probe's one runner, lent to ``SlurmProbe`` (which would close it after its read)."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    @property
    def target(self) -> str:
        return self._runner.target

    @property
    def commands_sent(self) -> int:
        return self._runner.commands_sent

    @property
    def login_user(self) -> str:
        return self._runner.login_user

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        return await self._runner.run(argv, stdin=stdin, check=check)

    async def aclose(self) -> None:
        return None


def rollout_request(facts: JobFacts, cluster: SlurmCluster, plan: ReadPlan,
                    ) -> tuple[dict[str, Any], dict[str, DumpRole]]:
    """The reader's request for one job, and each dump directory's role."""
    r = facts.record

    def fill(templates: Sequence[str]) -> list[str]:
        return expand_roots(templates, workdir=r.workdir, name=r.name, job_id=r.job_id,
                            user=r.user)

    logged = [posixpath.normpath(d if posixpath.isabs(d) or not r.workdir
                                 else posixpath.join(r.workdir, d))
              for d in dump_dirs_in_log(facts.log.text if facts.log else "")]
    # The log is the job's text, and verl's rollout_data_dir is often on scratch, outside the
    # workdir: a directory it names is read wherever it is, through the reader's guard (only
    # the job user's own regular files, under a root that user could list), so a log cannot
    # steer the probe account to anyone else's files.
    roles: dict[str, DumpRole] = {}
    for path in fill(plan.validation_dirs):
        roles[path] = "validation"
    for path in [*logged[-MAX_LOGGED_DIRS:], *fill(plan.rollout_dirs)]:
        role: DumpRole = "validation" if "val" in posixpath.basename(path).lower() else "rollout"
        roles.setdefault(posixpath.normpath(path), role)
    limits = plan.model_dump(exclude={"rollout_dirs", "validation_dirs"})
    # The trial tree the row counted (the collector's: a configured root, or a trials dir the
    # log names, entered inside the workdir or a root) is the one sampled. A trials dir the log
    # names is the run's own and the only one the row counted: the configured roots (Harbor's
    # default {workdir}/jobs may hold an earlier eval's trials) are not mixed into its sample.
    configured = fill(cluster.trial_roots)
    counted = [facts.trials.root] if facts.trials is not None and facts.trials.exists else []
    roots = counted if counted and counted[0] not in configured else [*counted, *configured]
    request = {**limits, "owner": r.user, "trial_roots": unique(roots),
               "dump_dirs": unique(roles)}
    return request, roles


async def read_job(
    cluster: SlurmCluster, job_id: str, plan: ReadPlan, *,
    aliases: Mapping[str, str] | None = None, runner_factory: RunnerFactory | None = None,
) -> tuple[JobFacts, RolloutFacts, tuple[JobFacts, ...]] | None:
    """The job's facts, its rollout sample and the jobs read beside it (``None`` when SLURM
    does not know the job). Those are ``jobtables job``'s (``collect_one``): a TIMEOUT's or
    COMPLETED run's successor candidates, records only, so the probe's row names the
    successor the sweep names (read alone, a chain restart was 'no successor queued')."""
    runner = (runner_factory or make_runner)(cluster)
    try:
        shared = _Shared(runner)
        probe = SlurmProbe(cluster, aliases=aliases, runner_factory=lambda _c: shared)
        # rollout_facts parses the whole tail
        found = await probe.collect_one(job_id, quiet=False, whole_tail=True)
        if not found.jobs:
            return None
        facts, related = found.jobs[0], tuple(found.jobs[1:])
        request, roles = rollout_request(facts, cluster, plan)
        res = await runner.run(list(COLLECTOR_ARGV), stdin=build_rollouts_script(request),
                               check=False)
    finally:
        await runner.aclose()
    answer, problem = _answer(res, runner.target)
    log = facts.log
    rollouts = rollout_facts(answer, log_text=log.text if log else "",
                             log_path=log.path if log else None, roles=roles, aliases=aliases)
    problems = (*_unread_log(log), *((problem,) if problem else ()))
    if problems:
        rollouts = rollouts.model_copy(update={"skipped": (*problems, *rollouts.skipped)})
    if log is not None:  # read whole for the rollouts; what the caller keeps is bounded
        facts = facts.model_copy(update={"log": retain(log, facts.summary)})
    return facts, rollouts, related


K8S_UNREAD = ("Kubernetes: no trial tree or rollout dump is read (the probe has no filesystem "
              "on the cluster); the log's printed completions and metrics only")


async def read_k8s_job(
    cluster: KubernetesCluster, job_id: str, *, aliases: Mapping[str, str] | None = None,
) -> tuple[JobFacts, RolloutFacts, tuple[JobFacts, ...]] | None:
    """A Kubernetes job's facts (no job read beside it: a Job has no successor) and what its
    log printed of its rollouts (``None`` when the namespace lists no such job): the
    completions TRL prints and the timing and length series. Its pods' files are not
    reachable, so no trial or dump is read (``skipped`` says so). The client's errors are
    raised."""
    from probes.kubernetes.probe import KubernetesProbe

    probe = KubernetesProbe(cluster, aliases=aliases)
    try:
        facts = await probe.collect_job(job_id, whole_tail=True)
    finally:
        await probe.aclose()
    if facts is None:
        return None
    log = facts.log
    text = log.text if log is not None and log.status == "ok" else ""
    rollouts = rollout_facts(None, log_text=text, log_path=log.path if log else None,
                             aliases=aliases)
    rollouts = rollouts.model_copy(
        update={"skipped": (*_unread_log(log), K8S_UNREAD, *rollouts.skipped)})
    if log is not None:  # read whole for the rollouts; what the caller keeps is bounded
        facts = facts.model_copy(update={"log": retain(log, facts.summary)})
    return facts, rollouts, ()


def _unread_log(log: LogFetch | None) -> tuple[str, ...]:
    """Why the log's completions and metrics were not read, when its fetch failed or found
    nothing: a probe with nothing to judge says so, not '0 logged steps' as if it was read."""
    if log is None or log.status in ("ok", "mismatch"):
        return ()
    where = log.requested_path or log.path or "no log path"
    what = ("no log found" if log.status == "missing"
            else f"log fetch failed: {log.error or 'error'}")
    return (f"{what} ({where}): its printed completions and metrics are unread",)


def _answer(res: CommandResult, target: str) -> tuple[dict[str, Any] | None, str | None]:
    if res.exit_status != 0 and (res.exit_status != NO_EXIT_STATUS or not res.stdout.strip()):
        # (no exit status: a reader stuck on a hung mount ends by closing its output after
        # its answer, which stands if it parses whole)
        return None, f"rollout reader failed: {res.failure(target)}"
    try:
        answer = json.loads(past_banner(res.stdout))  # (a login shell's text before it)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser
        return None, f"rollout reader printed unreadable output on {target}: {exc}"
    return (answer, None) if isinstance(answer, dict) else (None, "rollout reader: no answer")
