"""The ``jobtables`` command line (CONTRACT §1).

Policy: exit 0 whenever a report was produced (failing jobs and unreachable clusters are
reported, not errors); exit 2 with one line on stderr for bad usage or bad config; exit 1 for
anything else, logged with its traceback and a reference id. Nothing a user types reaches a
shell: job ids are validated before any probe runs. The grammar (commands, options and their
checks) is :mod:`bot.cli_parser`'s.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from bot import interrupt, preload
from bot.cli_parser import build_parser
from bot.config import Config, ConfigError
from bot.config_file import default_config_path, load_config
from bot.errors import JobNotFoundError, UsageError, UserError
from bot.logs import configure_logging, get_logger
from bot.sweep import Sweeper
from bot.sweep_result import SweepResult
from probes.config import ReplayCluster
from probes.errors import InvalidJobIdError
from probes.ids import split_job_ref

if TYPE_CHECKING:
    from report.models import ClusterReport, JobDetail


DEMO_RECORDING = Path(__file__).parent / "demo" / "recording"


def config_path(args: argparse.Namespace) -> Path:
    return args.config if args.config is not None else default_config_path()


def config_loader(args: argparse.Namespace) -> Callable[[], Config]:
    path = config_path(args)
    return lambda: load_config(path)


def demo_config() -> Config:
    """The embedded default: one replay cluster over the bundled recording."""
    return Config(clusters=(ReplayCluster(name="demo", path=str(DEMO_RECORDING)),))


def _emit(result: SweepResult, fmt: str, width: int) -> str:
    from report.grouping import group_report, groups_json, pending_task_counts  # (bot.preload)
    from report.render import render_json, render_tables, render_text  # (bot.preload)

    tasks = pending_task_counts(result.facts)  # arrays and grids: one row each (grouping.py)
    if fmt == "json":
        data = json.loads(render_json(result.report))
        data["groups"] = groups_json(result.report, pending_tasks=tasks, details=result.details)
        data["grids"] = [grid.model_dump(mode="json") for grid in result.report.grid]
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    report, details = group_report(result.report, result.details, pending_tasks=tasks)
    if fmt == "slack":
        from report.chunks import slack_messages, summary_lines, unformatted

        tables = render_tables(report, details, width=width)
        # Job names and cluster reasons: escaped by slack_messages, their words unable to format.
        header = unformatted("\n".join(summary_lines(result.report)))
        messages = slack_messages(tables, header=header)
        return json.dumps([{"text": m.text, "blocks": m.blocks} for m in messages], indent=1,
                          ensure_ascii=False)
    text = render_text(report, details, width=width)
    if result.degraded:
        text = f"({result.degraded})\n{text}"
    return text


async def _sweep(loader: Callable[[], Config], clusters: Sequence[str] | None,
                 show: Callable[[SweepResult], str]) -> None:
    """One sweep, printed from inside the loop; returns nothing. On Python 3.11 asyncio.run's
    restoring of the SIGINT handler formats the main task's repr, and a returned SweepResult
    would be in it: seconds and hundreds of MB at 500 jobs (issue 12). A Kubernetes cluster's
    memory of the jobs it saw live is kept for the next command (``bot.cli_memory``)."""
    from bot.cli_memory import CliProbeMemory

    sweeper = Sweeper(loader, probe_memory=CliProbeMemory())
    try:
        async with preload.meanwhile(loader().select(clusters)):
            result = await sweeper.sweep(clusters=clusters)
    finally:
        await sweeper.aclose()
    text = show(result)
    interrupt.check()  # after the rendering: a Ctrl-C during it prints nothing
    print(text)


async def _job(loader: Callable[[], Config], cluster: str | None, job_id: str,
               show: Callable[[JobDetail], str], fmt: str) -> None:
    """That job only (``Sweeper.job``), printed from inside the loop; returns nothing
    (asyncio.run formats the main task's repr, result included, on the way out). Not found
    where a cluster that may hold it could not be read, that is the answer (CONTRACT §1: an
    unreachable cluster is reported, not an error); not found elsewhere is bad usage. The
    last sweep's Kubernetes memory is read, not written (this is no sweep): a job gone since
    reads vanished."""
    from bot.cli_memory import CliProbeMemory

    sweeper = Sweeper(loader, probe_memory=CliProbeMemory(save=False))
    try:
        async with preload.meanwhile(loader().select([cluster] if cluster else None)):
            result = await sweeper.job(cluster, job_id)
        try:
            found = result.find(cluster, job_id)
        except JobNotFoundError:
            unread = [c for c in result.report.clusters if c.status == "unreachable"
                      and (cluster is None or c.name == cluster)]
            if not unread:
                raise
            interrupt.check()
            print(unread_answer(unread, f"{cluster}:{job_id}" if cluster else job_id,
                                 "not read", fmt))
            return
        text = show(found)
        interrupt.check()
        print(text)
    finally:
        await sweeper.aclose()


YOUNG_GC_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation in a one-shot command."""


@contextmanager
def _one_shot_gc() -> Iterator[None]:
    """The cyclic collector's youngest generation collected every ``YOUNG_GC_THRESHOLD``
    allocations (not 700) while a one-shot command runs; the thresholds are restored after
    (tests call ``main`` in-process). Such a command builds its facts, report and tables once:
    at 5,000 jobs the default's 300 passes (each also sweeping what survived into the middle
    generation) cost 0.40 s of judging and rendering's 1.1 s, these 17 passes 0.04 s, and
    cycles are still freed (with no collection at all peak RSS grew by 140 MB, issue 12)."""
    before = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def cmd_sweep(args: argparse.Namespace) -> int:
    loader = config_loader(args)
    config = loader()
    width = args.width or config.report.width
    with _one_shot_gc():
        interrupt.run(_sweep(lambda: config, args.cluster,
                             lambda r: _emit(r, args.format, width)))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    config = demo_config()
    width = args.width or config.report.width
    with _one_shot_gc():
        interrupt.run(_sweep(lambda: config, None, lambda r: _emit(r, args.format, width)))
    return 0


def job_ref(args: argparse.Namespace) -> tuple[str | None, str]:
    """``ID`` or ``CLUSTER:ID`` with ``--cluster``: (cluster or None, job id); a malformed id,
    or a cluster the ref and ``--cluster`` disagree on, is bad usage (``job`` and ``probe``)."""
    try:
        ref_cluster, job_id = split_job_ref(args.id)
    except InvalidJobIdError as exc:
        raise UsageError(str(exc)) from exc
    if ref_cluster and args.cluster and ref_cluster != args.cluster:
        raise UsageError(f"job {args.id!r} names cluster {ref_cluster!r} but --cluster says"
                         f" {args.cluster!r}: give one of them")
    return args.cluster or ref_cluster, job_id


def cmd_job(args: argparse.Namespace) -> int:
    cluster, job_id = job_ref(args)
    loader = config_loader(args)
    config = loader()
    width = args.width or config.report.width

    def show(detail: JobDetail) -> str:
        from report.render import render_job_detail, render_job_json  # (bot.preload)

        if args.format == "json":
            return render_job_json(detail)
        if args.format == "slack":  # what `/job` posts: mrkdwn-escaped, split as Slack allows
            from report.chunks import slack_messages
            from report.render import job_detail_pieces

            job = detail.report
            messages = slack_messages(job_detail_pieces(detail, width=width),
                                      header=f"{job.cluster}:{job.job_id}: {job.verdict}")
            return json.dumps([{"text": m.text, "blocks": m.blocks} for m in messages],
                              indent=1, ensure_ascii=False)
        return render_job_detail(detail, width=width)

    with _one_shot_gc():
        interrupt.run(_job(lambda: config, cluster, job_id, show, args.format))
    return 0


def unread_answer(clusters: Sequence[ClusterReport], ref: str, what: str, fmt: str) -> str:
    """``job``'s or ``probe``'s answer when the clusters that may hold ``ref`` could not be
    read: ``<ref>: <what>: cluster 'x' is unreachable (<why>)``; in JSON the contract's report
    object with those clusters and no job; in Slack form that line as one message."""
    from report.chunks import inert, mrkdwn_object
    from report.models import Report
    from report.render import render_json

    if fmt == "json":
        return render_json(Report(generated_at=datetime.now(UTC), jobs=[],
                                  clusters=list(clusters)))
    line = f"{ref}: {what}: " + "; ".join(
        f"cluster {c.name!r} is {c.status}" + (f" ({c.detail})" if c.detail else "")
        for c in clusters)
    if fmt == "slack":
        return json.dumps([{"text": line, "blocks": [{"type": "section", "text": mrkdwn_object(
            inert(line))}]}], indent=1, ensure_ascii=False)  # a reason's path: no italic
    return line


def cmd_admin(args: argparse.Namespace) -> int:
    """``check-config``, ``record``, ``bot`` and ``probe`` (``bot.admin_commands``, imported
    when one of them runs: a sweep, a job and ``--help`` never pay for it)."""
    from bot.admin_commands import ADMIN_COMMANDS

    return ADMIN_COMMANDS[args.command](args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sweep": cmd_sweep, "job": cmd_job, "demo": cmd_demo, "check-config": cmd_admin,
    "record": cmd_admin, "bot": cmd_admin, "probe": cmd_admin,
}


LAZY_STRUCTLOG = frozenset({"sweep", "job", "demo"})
"""Commands whose modules log through ``bot.logs.get_logger`` only: structlog is imported
(and configured) when something is logged at all (``bot.preload``)."""

LASTING = frozenset({"bot"})
"""Commands that run until they are stopped: their process ends through the interpreter's
ordinary exit (see :func:`launch`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; its exit code (tests call this in process)."""
    return _dispatch(argv)[0]


def launch() -> NoReturn:
    """The ``jobtables`` console script: :func:`main` on ``sys.argv``, then the exit.

    Every command but the ones in :data:`LASTING` leaves by ``os._exit`` once its output is
    out: the ``atexit`` handlers run (logging's shutdown among them), stdout and stderr are
    flushed, and the interpreter's teardown, which frees every module and object one by one
    and writes nothing, is skipped: 0.14-0.27 s of a 500-job ``jobtables sweep`` (issue 12).
    A flush that fails (stdout a closed pipe) leaves by ``sys.exit`` instead, so the
    interpreter reports it exactly as it always has (``Exception ignored ...``, exit 120).
    """
    code, command = _dispatch(None)
    if command in LASTING:
        sys.exit(code)
    atexit._run_exitfuncs()  # each handler runs once: they are unregistered as they run
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        sys.exit(code)
    os._exit(code)


def _dispatch(argv: Sequence[str] | None) -> tuple[int, str | None]:
    """(exit code, the command that ran: ``None`` when argparse answered by itself)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help is 0, bad usage is 2 (CONTRACT §1)
        return int(exc.code or 0), None
    configure_logging(structlog_now=args.command not in LAZY_STRUCTLOG)
    return _run(args), args.command


def _run(args: argparse.Namespace) -> int:
    try:
        return COMMANDS[args.command](args)
    except (UserError, ConfigError) as exc:
        print(exc.show(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # stdout's reader left (``jobtables sweep | head``): the report was produced, and
        # what is still buffered goes nowhere instead of failing the exit's flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:
        import uuid

        ref = uuid.uuid4().hex[:8]
        get_logger("jobtables").exception("internal error", ref=ref)
        print(f"jobtables: internal error (ref {ref}); see the log above", file=sys.stderr)
        return 1


if __name__ == "__main__":
    launch()
