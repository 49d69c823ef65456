"""Logging set-up: structlog to stderr, key=value in a terminal, JSON lines under systemd/k8s.

Policy: logs go to stderr only, so ``--format json`` on stdout stays machine-readable.
structlog (which imports rich's traceback and pygments: ~0.1 s of CPU on a busy 2-core machine)
is imported by the one-shot commands only when something logs (``bot.preload``): their
modules log through :func:`get_logger`, whose loggers import and configure it at their first
call, and ``configure_logging(structlog_now=False)`` leaves it to them.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from datetime import UTC, datetime
from typing import Any


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of writing, not at set-up time.

    A handler bound to the stream object of the moment breaks when that stream is swapped
    and closed later (pytest's capture does exactly that between tests).
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class _JsonFormatter(logging.Formatter):
    """A stdlib record as one JSON line with structlog's keys (event, level, timestamp),
    plus the logger's name and, when there is one, the exception's traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "event": record.getMessage(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat()
                         .replace("+00:00", "Z"),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


_pending: list[int] = []
"""The level structlog is to be configured with at its first use (``structlog_now=False``)."""
_pending_lock = threading.Lock()  # a first log call may come from a worker thread


def configure_logging(level: str | None = None, *, structlog_now: bool = True) -> None:
    """Configure stdlib logging, and structlog now or (``structlog_now=False``) at the first
    call of a :func:`get_logger` logger; ``JOBTABLES_LOG_JSON=1`` for JSON lines."""
    name = (level or os.environ.get("JOBTABLES_LOG_LEVEL", "WARNING")).upper()
    numeric = getattr(logging, name, logging.WARNING)
    logging.basicConfig(stream=_CurrentStderr(), level=numeric, format="%(message)s")
    if json_logs():
        # The libraries' stdlib records (Bolt, slack_sdk, asyncssh) are JSON lines too: a
        # JSON log pipeline cannot parse a plain line among them.
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and isinstance(
                    handler.stream, _CurrentStderr):
                handler.setFormatter(_JsonFormatter())
    with _pending_lock:
        _pending[:] = [numeric]
    if structlog_now:
        _configure_pending()


def _configure_pending() -> None:
    with _pending_lock:
        if not _pending:
            return
        _configure_structlog(_pending.pop())


def json_logs() -> bool:
    """``JOBTABLES_LOG_JSON`` asks for JSON lines: ``1``/``true``/``yes``/``on``; ``0``,
    ``false``, ``no``, ``off`` or empty keep the console format."""
    value = os.environ.get("JOBTABLES_LOG_JSON", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def _configure_structlog(level: int) -> None:
    import structlog

    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json_logs()
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
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


class _Logger:
    """A structlog logger that imports structlog (configured first if that is pending) only
    when one of its methods is looked up."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        _configure_pending()
        import structlog

        return getattr(structlog.get_logger(self._name), attr)


def get_logger(name: str) -> Any:
    """``structlog.get_logger(name)``, for the modules of the one-shot commands' path: creating
    it imports nothing; its first call imports structlog (and applies a pending set-up)."""
    return _Logger(name)


class DropMessage(logging.Filter):
    """Drops one logger's records of exactly one message: a library's warning that is known
    noise here, the logger's other records untouched (:func:`drop_message`)."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.message


def drop_message(logger: str, message: str) -> None:
    """Keep ``message`` out of ``logger``'s records, once however often it is asked."""
    target = logging.getLogger(logger)
    if not any(isinstance(f, DropMessage) and f.message == message for f in target.filters):
        target.addFilter(DropMessage(message))
