"""The probe error family.

Every third-party failure (asyncssh, OSError, kubernetes_asyncio's ApiException, aiohttp) is
translated exactly once, at the transport boundary, into one of these, with the original
chained as ``__cause__``. Callers above ``probes`` never catch a library's exception.

    ProbeError
    ├── UnreachableError        the cluster could not be reached (DNS, refused, timeout)
    │   └── HostKeyError        the host key is unknown or does not match known_hosts
    ├── AuthError               credentials were refused (SSH key, Kubernetes token/RBAC)
    ├── CommandError            a scheduler command ran and failed (non-zero exit, bad output)
    ├── FetchError              a log or listing could not be read
    └── InvalidJobIdError       a job id that is not a plain scheduler id (never sent anywhere)
"""

from __future__ import annotations


class ProbeError(Exception):
    """Base of every error raised by ``probes``."""


class UnreachableError(ProbeError):
    """The cluster could not be reached."""


class HostKeyError(UnreachableError):
    """The SSH host key is unknown or does not match ``known_hosts``."""


class AuthError(ProbeError):
    """Credentials were refused."""


class CommandError(ProbeError):
    """A scheduler command failed or printed something we cannot read."""


class FetchError(ProbeError):
    """A log, listing or result file could not be read."""


class InvalidJobIdError(ProbeError, ValueError):
    """A job id that is not a plain scheduler id or Kubernetes name."""
