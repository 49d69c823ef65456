"""A recording's API answers: kept while a live sweep runs, answered again in a replay.

Policy (the seam is :class:`probes.kubernetes.api.KubeApi`): :class:`RecordingClient` passes
each of the probe's calls to the live client and keeps what came back, the client's objects
and the pod log texts as read, and each error (its class and message); :class:`RecordedClient`
answers the same calls from those :class:`Answers`, so the probe's own logic runs over them:
a log read is answered by the recording's next read of that pod, container and run (the live
sweep's retries read again, and so does the replay), an error raised again as the same class.
A read the recording does not hold fails that read, as a log the API could not serve. A
replay cancels nothing.

Objects travel as the API's JSON (:func:`to_api_json`, :func:`from_api_json`: the client's own
serialiser and deserialiser, so a replayed object is the model the live sweep read).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import ApiClient

from probes.errors import AuthError, CommandError, ProbeError, UnreachableError
from probes.kubernetes.api import KubeApi
from probes.kubernetes.api_errors import ForbiddenError, NoAnswerError, NotFoundError
from probes.kubernetes.pytorchjob import KUBEFLOW_KINDS

ERRORS: dict[str, type[ProbeError]] = {cls.__name__: cls for cls in (
    NoAnswerError, UnreachableError, ForbiddenError, AuthError, NotFoundError, CommandError,
    ProbeError)}
"""The error classes a recorded call may have raised, by the name the recording keeps."""

# The client's serialiser needs no session: an instance built without __init__ opens no
# aiohttp ClientSession.
_CODEC: Any = ApiClient.__new__(ApiClient)  # its deserialize() is typed for HTTP responses only


def to_api_json(obj: Any) -> Any:
    """A client model as the API's JSON (field names and nesting as served); a dict as is."""
    return _CODEC.sanitize_for_serialization(obj)


def from_api_json(data: Any, klass: str) -> Any:
    """The API's JSON as the client's model ``klass`` (``"V1Job"``), as a live list is read."""
    return _CODEC.deserialize(_Body(json.dumps(data)), klass)


@dataclass(frozen=True, slots=True)
class _Body:
    """What the client's ``deserialize`` reads of an HTTP response: its body."""

    data: str


def error_name(exc: ProbeError) -> str:
    """The recorded name of ``exc``'s class: the nearest of :data:`ERRORS`."""
    return next(cls.__name__ for cls in type(exc).__mro__ if ERRORS.get(cls.__name__) is cls)


@dataclass(slots=True)
class LogRead:
    """One pod log read: the text and whether it may be cut (``KubeApi.read_log``), or the
    error it raised."""

    pod: str
    container: str | None
    previous: bool
    text: str = ""
    cut: bool = False
    error: ProbeError | None = None


@dataclass(slots=True)
class Answers:
    """What one sweep read from the API server, in the order it was read."""

    jobs: list[Any] = field(default_factory=list)
    jobsets: list[Any] = field(default_factory=list)
    jobsets_error: ProbeError | None = None
    """The JobSet list refused (the Role lacks it) or failing on its own: the probe goes on
    without JobSets."""
    pytorchjobs: list[Any] = field(default_factory=list)
    pytorchjobs_error: ProbeError | None = None
    """The PyTorchJob list refused or failed, as ``jobsets_error``."""
    rayjobs: list[Any] = field(default_factory=list)
    rayjobs_error: ProbeError | None = None
    """The RayJob list refused or failed, as ``jobsets_error``."""
    tfjobs: list[Any] = field(default_factory=list)
    tfjobs_error: ProbeError | None = None
    """The TFJob list refused or failed, as ``jobsets_error``."""
    mpijobs: list[Any] = field(default_factory=list)
    mpijobs_error: ProbeError | None = None
    """The MPIJob list refused or failed, as ``jobsets_error``."""
    pods: list[Any] = field(default_factory=list)
    reads: list[LogRead] = field(default_factory=list)


class RecordingClient:
    """The live client, each answer kept in :attr:`answers` (see the module policy)."""

    def __init__(self, live: KubeApi) -> None:
        self._live = live
        self.answers = Answers()

    @property
    def calls(self) -> int:
        return self._live.calls

    @property
    def turn_key(self) -> tuple[str | None, ...]:
        return self._live.turn_key

    def budget(self) -> AbstractContextManager[None]:
        return self._live.budget()

    async def close(self) -> None:
        await self._live.close()

    async def list_jobs(self) -> list[Any]:
        self.answers.jobs = await self._live.list_jobs()
        return self.answers.jobs

    async def list_jobsets(self) -> list[Any]:
        try:
            self.answers.jobsets = await self._live.list_jobsets()
        except (ForbiddenError, UnreachableError) as exc:  # as the probe takes either
            self.answers.jobsets_error = exc
            raise
        return self.answers.jobsets

    async def list_pytorchjobs(self) -> list[Any]:
        try:
            self.answers.pytorchjobs = await self._live.list_pytorchjobs()
        except (ForbiddenError, UnreachableError) as exc:
            self.answers.pytorchjobs_error = exc
            raise
        return self.answers.pytorchjobs

    async def list_rayjobs(self) -> list[Any]:
        try:
            self.answers.rayjobs = await self._live.list_rayjobs()
        except (ForbiddenError, UnreachableError) as exc:
            self.answers.rayjobs_error = exc
            raise
        return self.answers.rayjobs

    async def list_training_jobs(self, kind: str) -> list[Any]:
        plural = KUBEFLOW_KINDS[kind][0]
        try:
            setattr(self.answers, plural, await self._live.list_training_jobs(kind))
        except (ForbiddenError, UnreachableError) as exc:
            setattr(self.answers, f"{plural}_error", exc)
            raise
        return list(getattr(self.answers, plural))

    async def list_pods(self) -> list[Any]:
        self.answers.pods = await self._live.list_pods()
        return self.answers.pods

    async def read_log(self, pod: str, container: str | None, *,
                       previous: bool = False) -> tuple[str, bool]:
        read = LogRead(pod, container, previous)
        self.answers.reads.append(read)
        try:
            read.text, read.cut = await self._live.read_log(pod, container, previous=previous)
        except ProbeError as exc:
            read.error = exc
            raise
        return read.text, read.cut

    async def delete_job(self, name: str, *, uid: str | None = None) -> None:
        raise CommandError("a recording sweep cancels nothing")

    async def delete_jobset(self, name: str, *, uid: str | None = None) -> None:
        raise CommandError("a recording sweep cancels nothing")

    async def delete_pytorchjob(self, name: str, *, uid: str | None = None) -> None:
        raise CommandError("a recording sweep cancels nothing")

    async def delete_training_job(self, kind: str, name: str, *,
                                  uid: str | None = None) -> None:
        raise CommandError("a recording sweep cancels nothing")

    async def delete_rayjob(self, name: str, *, uid: str | None = None) -> None:
        raise CommandError("a recording sweep cancels nothing")


class RecordedClient:
    """A recording's :class:`Answers` served as the API server served them (module policy)."""

    def __init__(self, answers: Answers, where: str) -> None:
        self._answers = answers
        self._where = where
        self._reads: dict[tuple[str, str | None, bool], deque[LogRead]] = {}
        for read in answers.reads:
            self._reads.setdefault((read.pod, read.container, read.previous),
                                   deque()).append(read)
        self.calls = 0

    @property
    def turn_key(self) -> tuple[str | None, ...]:
        return ("replay", self._where)

    @contextmanager
    def budget(self) -> Iterator[None]:
        self.calls = 0
        yield

    async def close(self) -> None:
        return None

    async def list_jobs(self) -> list[Any]:
        self.calls += 1
        return list(self._answers.jobs)

    async def list_jobsets(self) -> list[Any]:
        self.calls += 1
        refused = self._answers.jobsets_error
        if refused is not None:
            raise type(refused)(str(refused))
        return list(self._answers.jobsets)

    async def list_pytorchjobs(self) -> list[Any]:
        self.calls += 1
        refused = self._answers.pytorchjobs_error
        if refused is not None:
            raise type(refused)(str(refused))
        return list(self._answers.pytorchjobs)

    async def list_rayjobs(self) -> list[Any]:
        self.calls += 1
        refused = self._answers.rayjobs_error
        if refused is not None:
            raise type(refused)(str(refused))
        return list(self._answers.rayjobs)

    async def list_training_jobs(self, kind: str) -> list[Any]:
        self.calls += 1
        plural = KUBEFLOW_KINDS[kind][0]
        refused = getattr(self._answers, f"{plural}_error")
        if refused is not None:
            raise type(refused)(str(refused))
        return list(getattr(self._answers, plural))

    async def list_pods(self) -> list[Any]:
        self.calls += 1
        return list(self._answers.pods)

    async def read_log(self, pod: str, container: str | None, *,
                       previous: bool = False) -> tuple[str, bool]:
        self.calls += 1
        queued = self._reads.get((pod, container, previous))
        if not queued:
            run = " (previous run)" if previous else ""
            raise CommandError(f"read log of pod/{pod}{run}: not in the recording")
        read = queued.popleft()
        if read.error is not None:
            raise type(read.error)(str(read.error))
        return read.text, read.cut

    async def delete_job(self, name: str, *, uid: str | None = None) -> None:
        raise CommandError(f"{self._where} is a recording: nothing to cancel")

    async def delete_jobset(self, name: str, *, uid: str | None = None) -> None:
        raise CommandError(f"{self._where} is a recording: nothing to cancel")

    async def delete_pytorchjob(self, name: str, *, uid: str | None = None) -> None:
        raise CommandError(f"{self._where} is a recording: nothing to cancel")

    async def delete_training_job(self, kind: str, name: str, *,
                                  uid: str | None = None) -> None:
        raise CommandError(f"{self._where} is a recording: nothing to cancel")

    async def delete_rayjob(self, name: str, *, uid: str | None = None) -> None:
        raise CommandError(f"{self._where} is a recording: nothing to cancel")
