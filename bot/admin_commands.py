"""The ``jobtables`` commands beside the report: ``check-config``, ``record``, ``bot``, ``probe``.

Policy: as every command of ``bot.cli`` (its exit codes, its one-line errors, its config
reading, which these share with it). ``bot.cli`` imports this module only when one of these
commands runs, so ``jobtables --help``, ``sweep``, ``job`` and ``demo`` never import it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from bot import interrupt
from bot.cli import config_loader, config_path, job_ref, unread_answer
from bot.config import Config
from bot.config_file import load_config
from bot.errors import UsageError, UserError
from probes.config import ClusterConfig, KubernetesCluster, SlurmCluster
from probes.errors import InvalidJobIdError, ProbeError


def cmd_check_config(args: argparse.Namespace) -> int:
    path = config_path(args)
    config = load_config(path)
    active = sum(1 for c in config.clusters if c.active)
    _warn(path, config)
    print(f"{path}: OK ({len(config.clusters)} clusters, {active} active)")
    return 0


def _warn(path: Path, config: Config) -> None:
    """check-config's warnings on stderr, one line each (``bot.config_checks``)."""
    from bot.config_checks import config_warnings

    for warning in config_warnings(config):
        print(f"jobtables: warning: {path}: {warning}", file=sys.stderr)


def cmd_record(args: argparse.Namespace) -> int:
    from probes.config import KubernetesCluster, SlurmCluster
    from probes.recording_files import RecordingRefused, check_dest

    config = config_loader(args)()
    cluster = config.cluster(args.cluster)
    if not isinstance(cluster, SlurmCluster | KubernetesCluster):
        raise UsageError(f"cluster {cluster.name!r} is {cluster.kind}: record needs a slurm or "
                         "kubernetes cluster")
    try:  # a DIR that is a file or holds other files is the argument's fault, not the cluster's
        check_dest(args.dir)
    except RecordingRefused as exc:
        raise UsageError(f"record: {exc}") from exc
    aliases = dict(config.metrics.aliases)
    try:
        if isinstance(cluster, KubernetesCluster):
            from probes.kubernetes.recording import record as record_kubernetes

            out = interrupt.run(record_kubernetes(cluster, args.dir, aliases=aliases))
        else:
            from probes.slurm.recording import record

            out = interrupt.run(record(cluster, args.dir, aliases=aliases))
    except ProbeError as exc:
        # Not a bug and no report to print: one line naming the reason (host key, refused
        # port, failed command, an API server that did not answer), exit 1, nothing written.
        print(f"jobtables: cannot record {cluster.name!r}: {exc}", file=sys.stderr)
        return 1
    print(f"recorded {cluster.name} into {out}")
    return 0


def cmd_bot(args: argparse.Namespace) -> int:
    from bot.config_checks import redis_file_problems

    # Fail fast, with the line and key, before binding a port and before loading the Slack
    # and HTTP stack (bot.server: seconds of CPU on a busy machine).
    config = load_config(config_path(args))
    problems = redis_file_problems(config.redis)
    if problems:
        raise UserError(problems[0])
    _warn(config_path(args), config)  # what check-config would warn of, said at start too
    from bot.server import run_bot

    asyncio.run(run_bot(config_path(args), port=args.port))
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    """``jobtables probe ID``: the deep probe (bot.deep_probe); an id the cluster's kind cannot
    have is bad usage (exit 2). A cluster that could not be read is reported, not an error
    (CONTRACT §1: exit 0): the answer says so, in JSON as the contract's report object with the
    cluster ``unreachable`` and no job."""
    from bot.deep_probe import probed_cluster, run_deep_probe
    from report.models import ClusterReport
    from report.probe_text import render_probe_json, render_probe_text

    cluster, job_id = job_ref(args)
    config = config_loader(args)()
    try:
        if cluster is None and len(_live(config)) > 1:
            cluster = interrupt.run(_holder(config, job_id, args.format))
            if cluster is None:
                return 0  # a cluster that may hold it could not be read: that is the answer
        detail = interrupt.run(run_deep_probe(config, cluster, job_id))
    except InvalidJobIdError as exc:  # a name no SLURM job has (the cluster's kind decides)
        raise UsageError(f"cannot probe {args.id}: {exc}") from exc
    except ProbeError as exc:
        target = probed_cluster(config, cluster)
        print(unread_answer([ClusterReport(name=target.name, kind=target.kind,
                                            status="unreachable", detail=str(exc))],
                             f"{target.name}:{job_id}", "no deep probe verdict", args.format))
        return 0
    if args.format == "json":
        print(render_probe_json(detail))
    else:
        print(render_probe_text(detail, width=args.width or config.report.width))
    return 0


def _live(config: Config) -> list[ClusterConfig]:
    """The active clusters the deep probe can read (a replay has no rollouts)."""
    return [c for c in config.clusters
            if c.active and isinstance(c, SlurmCluster | KubernetesCluster)]


async def _holder(config: Config, job_id: str, fmt: str) -> str | None:
    """The cluster that holds ``job_id`` when none was named among several: found as
    ``jobtables job ID`` finds it (each live cluster asked for that job only), so an id on
    several clusters is asked about, never picked (``UsageError``), and one on none is
    ``JobNotFoundError``. ``None`` once the answer is printed: not found where a cluster that
    may hold it could not be read (CONTRACT §1: reported, exit 0)."""
    from bot.cli_memory import CliProbeMemory
    from bot.errors import JobNotFoundError
    from bot.sweep import Sweeper

    live = config.model_copy(update={"clusters": tuple(_live(config))})
    sweeper = Sweeper(lambda: live, probe_memory=CliProbeMemory(save=False))
    try:
        result = await sweeper.job(None, job_id)
    finally:
        await sweeper.aclose()
    try:
        found = result.find(None, job_id).report.cluster
    except JobNotFoundError:
        unread = [c for c in result.report.clusters if c.status == "unreachable"]
        if not unread:
            raise
        print(unread_answer(unread, job_id, "no deep probe verdict", fmt))
        return None
    unread = [c for c in result.report.clusters if c.status == "unreachable"]
    if unread:  # ids overlap between clusters: the one meant may be on a cluster not read
        names = ", ".join(f"{c.name!r} ({c.detail})" if c.detail else repr(c.name)
                          for c in unread)
        others = " or ".join(f"jobtables probe {c.name}:{job_id}" for c in unread)
        print(f"jobtables: note: probing job {job_id} of cluster {found!r}; could not read "
              f"{names}, which may hold another job {job_id}: {others}", file=sys.stderr)
    return found


ADMIN_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check-config": cmd_check_config, "record": cmd_record, "bot": cmd_bot, "probe": cmd_probe,
}
