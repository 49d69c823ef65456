"""The bot's one config source: re-read at each sweep, the last good file kept on a bad edit.

Policy (CONTRACT §2): the Sweeper calls :meth:`ConfigSource.load` at the start of a sweep and
everything else reads :meth:`ConfigSource.current`. An edit that breaks the file is refused
once it was read good: the sweeps go on with the last good config and the reason is told
once (:meth:`ConfigSource.news`).
"""

from __future__ import annotations

from collections.abc import Callable

from bot.config import Config, ConfigError


class ConfigSource:
    """The bot's one config source: ``load()`` re-reads (a sweep), ``current()`` reads the last."""

    def __init__(self, loader: Callable[[], Config]) -> None:
        self._loader = loader
        self._current: Config | None = None
        self.error: str | None = None
        """Why the file read last was refused while an earlier one is in use (None: the file
        in use is the file as it is)."""
        self._told: str | None = None

    @classmethod
    def fixed(cls, config: Config) -> ConfigSource:
        return cls(lambda: config)

    def load(self) -> Config:
        """Re-read the config (the start of a sweep). A bad file raises when none was read
        yet (the bot's start fails fast); later, an edit that made it bad keeps the last good
        config in use and says why in :attr:`error`, logged once per distinct reason: the
        sweeps go on (before, every one raised until the file was fixed, and the channel
        heard nothing)."""
        try:
            self._current = self._loader()
        except ConfigError as exc:
            if self._current is None:
                raise
            if str(exc) != self.error:
                from bot.logs import get_logger

                get_logger(__name__).warning(
                    "config edit refused; the last good config stays in use", error=str(exc))
            self.error = str(exc)
            return self._current
        self.error = self._told = None  # fixed: the same bad edit made again is told again
        return self._current

    def news(self) -> str | None:
        """:attr:`error` when it was not handed out yet (the channel is told each reason
        once), else None. This replica's own memory: the replicas share theirs in Redis
        (:func:`bot.refusals.refusal_news`), and this one decides while Redis cannot answer."""
        if self.error is None or self.error == self._told:
            return None
        self._told = self.error
        return self.error

    def current(self) -> Config:
        """The config the latest sweep ran with (read once if no sweep ran yet)."""
        return self._current if self._current is not None else self.load()
