"""The seam the Kubernetes probe reads the API server through.

Policy: :class:`probes.kubernetes.probe.KubernetesProbe` (and its
:class:`probes.kubernetes.log_reader.LogReader`) make every API call through one object of
this shape: the real one, :class:`probes.kubernetes.client.KubeClient` (kubernetes_asyncio,
bounded and counted calls, errors translated once), or a recording's answers read back,
:class:`probes.kubernetes.recorded.RecordedClient` (``kind = "replay"``), so a replay runs the
probe's own logic, not a copy of it. A recording is made by
:class:`probes.kubernetes.recorded.RecordingClient`, which passes each call to the real client
and keeps its answer.

Lists return the client's objects (``V1Job``, ``V1Pod``; JobSets, PyTorchJobs and RayJobs as
plain dicts); errors are
:mod:`probes.errors` (and :mod:`probes.kubernetes.api_errors`), never a third party's.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol


class KubeApi(Protocol):
    """What the probe asks of one cluster's API server (see the module policy)."""

    @property
    def calls(self) -> int:
        """API calls made in the current sweep (its ``round_trips``)."""
        ...

    @property
    def turn_key(self) -> tuple[str | None, ...]:
        """The server this reaches: probes of one key take turns (their calls one at a time)."""
        ...

    def budget(self) -> AbstractContextManager[None]:
        """One sweep: its calls share the cluster's ``timeout_s``, counted from zero."""
        ...

    async def close(self) -> None: ...

    async def list_jobs(self) -> list[Any]: ...

    async def list_jobsets(self) -> list[Any]: ...

    async def list_pytorchjobs(self) -> list[Any]: ...

    async def list_rayjobs(self) -> list[Any]: ...

    async def list_training_jobs(self, kind: str) -> list[Any]:
        """A training-operator kind's objects besides PyTorchJobs (``TFJob``, ``MPIJob``)."""
        ...

    async def list_pods(self) -> list[Any]: ...

    async def read_log(self, pod: str, container: str | None, *,
                       previous: bool = False) -> tuple[str, bool]: ...

    async def delete_job(self, name: str, *, uid: str | None = None) -> None: ...

    async def delete_jobset(self, name: str, *, uid: str | None = None) -> None: ...

    async def delete_pytorchjob(self, name: str, *, uid: str | None = None) -> None: ...

    async def delete_training_job(self, kind: str, name: str, *,
                                  uid: str | None = None) -> None: ...

    async def delete_rayjob(self, name: str, *, uid: str | None = None) -> None: ...
