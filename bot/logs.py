"""Logging set-up: structlog to stderr, key=value in a terminal, JSON lines under systemd/k8s.

Policy: logs go to stderr only, so ``--format json`` on stdout stays machine-readable.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of writing, not at set-up time.

    A handler bound to the stream object of the moment breaks when that stream is swapped
    and closed later (pytest's capture does exactly that between tests).
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: str | None = None) -> None:
    """Configure structlog and stdlib logging once; ``JOBTABLES_LOG_JSON=1`` for JSON lines."""
    name = (level or os.environ.get("JOBTABLES_LOG_LEVEL", "WARNING")).upper()
    logging.basicConfig(stream=_CurrentStderr(),
                        level=getattr(logging, name, logging.WARNING), format="%(message)s")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if os.environ.get("JOBTABLES_LOG_JSON")
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, name, logging.WARNING)),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
