"""Reading ``jobtables.toml``: the file read with bounds, parsed as TOML and checked into a
:class:`bot.config.Config`, or refused with line-precise errors.

Policy: a bad file raises :class:`bot.config.ConfigError`, whose message names the file, the
line and the key (the line is found by ``bot.config_lines``, imported only when a file is
refused). The read is bounded in size (:data:`MAX_CONFIG_BYTES`) and time
(:data:`CONFIG_READ_TIMEOUT_S`): ``/dev/zero``, a huge file or a FIFO nobody writes to is bad
config, never a hang; so is TOML nested deeper than :data:`MAX_CONFIG_DEPTH`. Validation is
strict (TOML values are typed; its arrays become tuples first). What the models cannot place
on a line is checked on the TOML first (a cluster's ``benign_patterns``, a name used twice,
``owners`` that are not Slack user ids), and ``redis.window_len`` must exceed
``thresholds.window``. A pipe (``--config <(...)``) reads as well as a file.
"""

from __future__ import annotations

import os
import re
import select
import stat
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path, PosixPath
from typing import Any

from pydantic import ValidationError

from bot.config import NOT_A_USER_ID, SLACK_USER_ID, Config, ConfigError


class FoundConfigPath(PosixPath):
    """``./jobtables.toml`` taken by default (neither ``--config`` nor ``$JOBTABLES_CONFIG``):
    read only when it is the user's own (:func:`_check_found`)."""


def default_config_path() -> Path:
    """``--config`` default: ``$JOBTABLES_CONFIG``, then ``./jobtables.toml``."""
    env = os.environ.get("JOBTABLES_CONFIG")
    return Path(env) if env else FoundConfigPath("jobtables.toml")


def _check_found(fd: int, path: Path) -> None:
    """Refuse a config found in the current directory (not named) that another user owns or
    anyone may write: a config can name programs to run (a kubeconfig's ``exec`` credential
    plugin), and running ``jobtables`` in a shared directory (/tmp, a team scratch) must not
    run what someone else left there, as ``git`` refuses another user's repository. Root's
    file is trusted (root could do anything); a config named explicitly is the user's
    choice, whoever owns it (a ConfigMap mounted into the bot's pod is root's)."""
    info = os.fstat(fd)
    me = os.geteuid()
    if info.st_uid not in (me, 0):
        why = f"owned by uid {info.st_uid}, not by you (uid {me})"
    elif info.st_mode & stat.S_IWOTH:
        why = f"writable by anyone (mode {stat.S_IMODE(info.st_mode):04o})"
    else:
        return
    raise ConfigError(f"{path}: {why}: a config found in the current directory is read only"
                      " when it is your own; name it with --config or $JOBTABLES_CONFIG if you"
                      " trust it")


MAX_CONFIG_BYTES = 4 << 20
"""A config is a few KB: read up to this, so a path that never ends (``/dev/zero``) or a
huge file is refused at once rather than read for ever."""


CONFIG_READ_TIMEOUT_S = 10.0
"""How long a config read may wait for its bytes: a FIFO nobody writes to (or a pipe whose
writer hangs) is bad config after this, not a command hung for ever."""


def _read_bounded(path: Path) -> bytes:
    """Up to ``MAX_CONFIG_BYTES + 1`` bytes of ``path``, within :data:`CONFIG_READ_TIMEOUT_S`.
    Opened without blocking (a FIFO's open() waits for a writer otherwise), then read as poll()
    says bytes are there: a FIFO's EOF is only an EOF once a writer came and went (before one
    comes, poll() waits and read() answers b'' at once)."""
    timeout = CONFIG_READ_TIMEOUT_S
    deadline = time.monotonic() + timeout
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if isinstance(path, FoundConfigPath):
            _check_found(fd, path)  # on the opened file: no swap between check and read
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONFIG_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(1, int(left * 1000))):
                if time.monotonic() < deadline:
                    continue  # poll() woke early (a signal): wait out the rest
                raise ConfigError(f"{path}: nothing to read within {timeout:g}s (a FIFO or "
                                  "pipe with no writer?)" if not chunks else
                                  f"{path}: not read whole within {timeout:g}s (its writer "
                                  "stopped writing)")
            try:
                chunk = os.read(fd, min(1 << 16, MAX_CONFIG_BYTES + 1 - size))
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_config(path: Path) -> Config:
    """Read and validate ``path``; raise :class:`ConfigError` naming the line and key. The
    read is bounded in size (:data:`MAX_CONFIG_BYTES`) and time (:data:`CONFIG_READ_TIMEOUT_S`)."""
    try:  # a pipe (--config <(...), /dev/stdin) reads as well as a file
        data = _read_bounded(path)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such config file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes: not a config file")
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (Windows editors) is no statement
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    return parse_config(text, source=str(path))


MAX_CONFIG_DEPTH = 32
"""How deep a config's tables and arrays may nest (a real one: 4). TOML nested thousands deep
exhausts Python's recursion in the parser, or in any walk over what it read: bad config."""


def parse_config(text: str, *, source: str = "<config>") -> Config:
    """The roster in ``text``, checked; a ``ConfigError`` naming ``source``'s line if not."""
    data = _load_toml(text, source)
    clusters = data.get("clusters")
    listed = clusters if isinstance(clusters, list) else []
    _check_benign_patterns(listed, text, source)
    _check_unique_names(listed, text, source)
    _check_owners(listed, text, source)
    try:
        # Strict: TOML values are typed, so "24" or true where a number belongs is a mistake
        # (lax validation read them as 24.0 and 1.0). Strict tuples take no lists: TOML's
        # arrays become tuples first.
        config = Config.model_validate(_tuples(data), strict=True)
    except ValidationError as exc:
        from bot.config_lines import describe_errors

        raise ConfigError(describe_errors(exc, text, source)) from exc
    _check_window(config, data, text, source)
    return config


def _load_toml(text: str, source: str) -> dict[str, Any]:
    """``text`` as TOML; a ``ConfigError`` for a syntax error or a value nested too deep."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        from bot.config_lines import syntax_error

        raise ConfigError(syntax_error(source, text, str(exc))) from exc
    except RecursionError as exc:
        from bot.config_lines import deep_value, too_deep

        raise ConfigError(too_deep(source, *deep_value(text))) from exc
    if (path := _deep_path(data)) is not None:
        from bot.config_lines import too_deep, top_line

        raise ConfigError(too_deep(source, top_line(text, path[0]), path[0]))
    return data


def _check_benign_patterns(clusters: list[Any], text: str, source: str) -> None:
    """Every cluster's ``benign_patterns`` compile (a bad one is named with its line)."""
    for index, cluster in enumerate(clusters):
        patterns = cluster.get("benign_patterns", []) if isinstance(cluster, dict) else []
        for pattern in patterns if isinstance(patterns, list) else []:
            if not isinstance(pattern, str):
                continue
            try:
                re.compile(pattern)
            except re.error as exc:
                line = _line_of(text, ("clusters", index, "benign_patterns"))
                raise ConfigError(
                    f"{source}:{line}: clusters.{index}.benign_patterns: "
                    f"bad regex {pattern!r}: {exc}"
                ) from exc


def _check_unique_names(clusters: list[Any], text: str, source: str) -> None:
    """No two clusters share a name (the second one is named with its line)."""
    seen: set[str] = set()
    for index, cluster in enumerate(clusters):
        name = cluster.get("name") if isinstance(cluster, dict) else None
        if isinstance(name, str) and name in seen:
            line = _line_of(text, ("clusters", index, "name"))
            raise ConfigError(f"{source}:{line}: clusters.{index}.name: cluster name "
                              f"{name!r} is used twice")
        if isinstance(name, str):
            seen.add(name)


def _check_owners(clusters: list[Any], text: str, source: str) -> None:
    """Every cluster's ``owners`` map users to Slack user ids (a bad one named with its line)."""
    for index, cluster in enumerate(clusters):
        owners = cluster.get("owners", {}) if isinstance(cluster, dict) else {}
        for user, slack_id in (owners.items() if isinstance(owners, dict) else ()):
            if isinstance(slack_id, str) and not SLACK_USER_ID.match(slack_id):
                line = _line_of(text, ("clusters", index, "owners", user))
                raise ConfigError(f"{source}:{line}: clusters.{index}.owners.{user}: "
                                  f"{slack_id!r} is {NOT_A_USER_ID}")


def _check_window(config: Config, data: dict[str, Any], text: str, source: str) -> None:
    """``redis.window_len`` exceeds ``thresholds.window``: else every windowed rule would be
    starved of history on a warm read."""
    kept, window = config.redis.window_len, config.thresholds.window
    if kept <= window:
        key = ("redis", "window_len") if "window_len" in data.get("redis", {}) else (
            "thresholds", "window")
        line = _line_of(text, key)
        raise ConfigError(f"{source}:{line}: {'.'.join(key)}: redis.window_len ({kept}) must be "
                          f"greater than thresholds.window ({window}): the rules read that "
                          "many previous values and the step judged")


def _line_of(text: str, key: Sequence[str | int]) -> int | None:
    """The line of ``key`` in ``text``, for a :class:`ConfigError`: the locator's module is
    imported only when a file is refused (``bot.config_lines``)."""
    from bot.config_lines import KeyLocator

    return KeyLocator(text).line_for(key)


def _tuples(value: Any) -> Any:
    """``value`` with every list (a TOML array) turned into a tuple, at any depth."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    return value


def _deep_path(data: dict[str, Any]) -> tuple[str, ...] | None:
    """The key path of a value nested deeper than ``MAX_CONFIG_DEPTH`` (walked without
    recursion), or ``None``."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_CONFIG_DEPTH:
            return path
        if isinstance(value, dict):
            stack.extend((v, (*path, str(k))) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*path, str(i))) for i, v in enumerate(value))
    return None
