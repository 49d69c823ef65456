"""One sweep's pod log reads: the tail of the pod chosen, retried once when unusable, parsed
off the event loop; a failed rank's first error and a crash loop's previous run's.

Policy (the seed: a failed fetch is indistinguishable from an idle job): a body ending in a
kubelet error (``pod_logs.log_fetch_problem``), or with fewer lines than ``min_log_lines``, is
retried once and then a failed fetch, never "no metrics". A read refused (401, 403: the Role
lacks ``pods/log``) is every job's failed fetch, asked once per sweep. A read that gets no
answer is its node's kubelet's: that node's other pods are skipped, the other jobs still read;
a second silent read, or an unreachable API, stops the sweep's reads (each would spend a
timeout). A reader lives one sweep (or one ``/job``): its outages are that sweep's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from probes.config import KubernetesCluster
from probes.errors import AuthError, CommandError, ProbeError, UnreachableError
from probes.kubernetes.api import KubeApi
from probes.kubernetes.api_errors import NoAnswerError
from probes.kubernetes.attempts import FailedRank
from probes.kubernetes.pod_logs import log_container, log_fetch_problem
from probes.kubernetes.views import PodView
from probes.logs.excerpt import retain
from probes.logs.parse import parse_log
from probes.models import Fault, LogFetch, LogSummary

RANK_ERROR_CHARS = 200
"""The failed rank's error, as quoted in its ``jobtables/failed-rank`` label."""


class LogReader:
    """The log reads of one sweep of one cluster, through its client (one call at a time)."""

    def __init__(self, api: KubeApi, cluster: KubernetesCluster,
                 aliases: Mapping[str, str], *, whole_tail: bool = False) -> None:
        self._api = api
        self._cluster = cluster
        self._aliases = aliases
        self.whole_tail = whole_tail
        """The job's log tail is kept whole (:meth:`KubernetesProbe.collect_job`, the deep
        probe), not reduced to its excerpts."""
        self.outage: str | None = None
        """Why the sweep's later log reads are not made (refused, the API silent)."""
        self.silent_nodes: dict[str, str] = {}
        """Node -> the log read that got no answer there this sweep (its kubelet)."""

    async def previous_error(self, pod: PodView) -> str | None:
        """The first real fault in the log of the container's previous run, if it can be
        read (gone, refused or silent: ``None``, the row as it was)."""
        if self.outage is not None or pod.node in self.silent_nodes:
            return None
        try:
            text, cut = await self._api.read_log(pod.name, log_container(pod), previous=True)
        except (CommandError, AuthError, UnreachableError):
            return None
        fetched = LogFetch(requested_path=f"pod/{pod.name}", path=f"pod/{pod.name}",
                           status="ok", text=text, size=len(text.encode()), attempts=1)
        summary, _ = await asyncio.to_thread(self.parse, fetched, cut=cut)
        faults = real_faults(summary)
        if not faults:
            return None
        first = min(faults, key=lambda x: x.line_no)
        return f"{first.kind}: " + " ".join((first.detail or first.excerpt).split())[
            :RANK_ERROR_CHARS]

    async def rank_error(self, rank: FailedRank, leader: PodView,
                          summary: LogSummary | None) -> str | None:
        """What the failed rank's log says first (its first real fault: one more log read
        when it is not the pod already read), else its termination message, else ``None``."""
        if rank.pod.name != leader.name:
            fetched, cut = await self.fetch(rank.pod)
            summary = None
            if fetched.status == "ok":
                summary, _ = await asyncio.to_thread(self.parse, fetched, cut=cut)
        faults = real_faults(summary)
        if faults:
            first = min(faults, key=lambda x: x.line_no)
            return " ".join((first.detail or first.excerpt).split())[:RANK_ERROR_CHARS]
        return rank.pod.message

    def parse(self, log: LogFetch, *, cut: bool = False) -> tuple[LogSummary, LogFetch]:
        """The tail's summary, and the log with its bounded excerpts in place of the tail
        (``probes.logs.excerpt``): a job's facts do not grow with its log. ``cut``: the tail
        may start past the log's first line (``parse_log``'s ``log_start``; no head read)."""
        summary = parse_log(log.text, aliases=self._aliases,
                            benign_patterns=self._cluster.benign_patterns, mtime=log.mtime,
                            log_start=not cut)
        return summary, (log if self.whole_tail else retain(log, summary))

    async def fetch(self, pod: PodView) -> tuple[LogFetch, bool]:
        """Tail the pod's log; retry once when the body is an error or below the line floor.
        With it, whether the tail may be cut from a longer log (``KubeClient.read_log``)."""
        container = log_container(pod)
        requested = f"pod/{pod.name}"
        named = container is not None and (len(pod.containers) > 1
                                           or container not in pod.containers)
        path = f"{requested} -c {container}" if named else requested
        problem = "not fetched"
        attempts = 0
        while attempts < 2:
            if self.outage is not None:
                problem = f"not fetched: {self.outage}"
                break
            silent = self.silent_nodes.get(pod.node or "")
            if silent is not None:
                problem = f"not fetched: node {pod.node or '?'} did not answer: {silent}"
                break
            attempts += 1
            try:
                text, cut = await self._api.read_log(pod.name, container)
            except NoAnswerError as exc:
                # The API server proxies a log read to the pod's kubelet: one silent node is
                # that node's (its other pods are skipped, the rest still read); a second
                # silent read is the API itself (do not spend a timeout per job).
                problem = str(exc)
                if self.silent_nodes or not pod.node:
                    self.outage = _outage("log reads stopped", problem)
                else:
                    self.silent_nodes[pod.node] = problem
                break
            except UnreachableError as exc:
                problem = str(exc)  # do not spend a timeout per job
                self.outage = _outage("log reads stopped", problem)
                break
            except AuthError as exc:
                # A Role grants pods/log namespace-wide (pod names are generated): a refusal
                # is every pod's, and no retry heals it (each job asked twice, refused twice).
                problem = str(exc)
                self.outage = _outage("log reads refused", problem)
                break
            except ProbeError as exc:
                problem = str(exc)
                continue
            problem = log_fetch_problem(text, self._cluster.min_log_lines) or ""
            if not problem:
                return LogFetch(requested_path=requested, path=path, status="ok", text=text,
                                size=len(text.encode()), attempts=attempts), cut
        return LogFetch(requested_path=requested, path=path, status="failed", error=problem,
                        attempts=max(attempts, 1)), False


def real_faults(summary: LogSummary | None) -> list[Fault]:
    """The log's real faults (a walltime line is none)."""
    return [x for x in (summary.faults if summary else ()) if x.kind != "time-limit"]


def _outage(what: str, error: str) -> str:
    """The reason the sweep's later log reads are not made, as the other jobs' rows say it:
    what happened first, the failed read's pod last (``read log of pod/x: HTTP 403 ...`` led
    each other row, cut, with another job's pod and no reason)."""
    call, sep, rest = error.partition(": ")
    if not sep or not call.startswith("read log of "):
        return f"{what}: {error}"
    return f"{what}: {rest} (at {call.removeprefix('read log of ')})"
