"""The bot's error family, kept apart from bugs.

    UserError            something the user can fix: bad arguments, bad config, unknown job.
    ├── ConfigError      (bot.config) the config file is missing or invalid
    └── UsageError       bad command-line or slash-command arguments
        └── UnknownClusterError  a cluster name the config does not have (one text everywhere)
    JobNotFoundError     (a UserError) no such job in any reporting cluster

A ``UserError`` is shown as one short line (stderr, exit 2) or an ephemeral Slack reply.
Anything else is a bug: logged with its traceback and a reference id, exit 1.
"""

from __future__ import annotations


class UserError(Exception):
    """An error the user can fix; its message is shown as it is."""

    exit_code = 2

    def show(self) -> str:
        return f"jobtables: {self}"


class UsageError(UserError):
    """Bad arguments."""


class JobNotFoundError(UserError):
    """The job id names no job in any reporting cluster."""


class UnknownClusterError(UsageError):
    """A cluster name that is not in the config: the one text the CLI and Slack both show."""

    def __init__(self, name: str, configured: list[str] | tuple[str, ...]) -> None:
        self.name = name
        self.configured = tuple(sorted(configured))
        super().__init__(
            f"no cluster named {name!r}; configured: {', '.join(self.configured) or 'none'}")
