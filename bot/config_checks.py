"""What ``check-config`` and the bot's start warn about in a config that parsed.

Policy: these are not errors: the file is valid, but something it names will not work as
meant (a Redis TLS file that is a FIFO, one owners map for several clusters, ended jobs kept
longer than the bot's memory, a path that does not exist here, a regex that may backtrack
without bound on the text a job writes, or that matches everything). ``bot.cli`` imports this
module only in the commands that warn.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from bot.config import Config, RedisSection

REDIS_URL_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
"""The query arguments of a ``rediss://`` URL that name a file redis-py reads."""


def redis_files(section: RedisSection) -> list[tuple[str, str]]:
    """``(key, path)`` of each file redis-py reads when it connects over TLS: ``tls_ca_file``
    and the URL's :data:`REDIS_URL_FILES`. It reads them synchronously, in the event loop, as
    it connects (``bot.cli``'s ``bot`` checks each is a regular file first). A plain
    connection reads none."""
    secure = section.tls if section.sentinels else section.url.startswith("rediss://")
    if not secure:
        return []
    files = [("tls_ca_file", section.tls_ca_file)] if section.tls_ca_file else []
    if not section.sentinels:
        query = parse_qs(urlsplit(section.url).query)
        files += [(f"url {key}", value) for key in REDIS_URL_FILES for value in query.get(key, ())]
    return files


def redis_file_problems(section: RedisSection) -> list[str]:
    """One line per file of :func:`redis_files` that is not a regular file (a FIFO or a
    device would block the bot's event loop for ever)."""
    from probes.local_files import check_regular, refusal

    problems = []
    for key, path in redis_files(section):
        try:
            check_regular(str(Path(path).expanduser()))
        except (OSError, ValueError) as exc:
            problems.append(f"[redis] {key} {path}: {refusal(exc)}")
    return problems


def config_warnings(config: Config) -> list[str]:
    """What ``check-config`` warns about without rejecting the file."""
    warnings = [f"{problem} (the bot will not start)"
                for problem in redis_file_problems(config.redis)]
    if config.slack.owners and len(config.clusters) > 1:
        warnings.append(
            "[slack.owners] maps a user name to the same Slack id on every cluster, and "
            f"{len(config.clusters)} clusters are configured: `alice` on one cluster may not be "
            "`alice` on another. Move the mapping into each [[clusters]] entry as `owners`.")
    warnings += _memory_warnings(config)
    warnings += _output_bound_warnings(config)
    warnings += _pattern_warnings(config)
    for cluster in config.clusters:
        files = [("replay path", getattr(cluster, "path", None)),
                 ("known_hosts", getattr(cluster, "known_hosts", None)),
                 ("kubeconfig", getattr(cluster, "kubeconfig", None)),
                 *(("client key", key) for key in getattr(cluster, "client_keys", ()))]
        for what, path in files:
            if not path:
                continue
            found = Path(path).expanduser()
            wrong = ("does not exist on this machine" if not found.exists()
                     else "is not a directory" if what == "replay path" and not found.is_dir()
                     else "is not a regular file"  # a FIFO or a device is read for ever
                     if what != "replay path" and not found.is_file() else None)
            if wrong:
                warnings.append(f"cluster {cluster.name!r}: {what} {path} {wrong} "
                                "(the sweep will report the cluster unreachable)")
    return warnings


def _memory_warnings(config: Config) -> list[str]:
    """A cluster whose ended jobs stay in the report (``recent_hours``) longer than the bot
    remembers what it told of them (``[redis] expire_hours``): once that memory expires, a job
    still shown can be new to the bot again and its cleanup line and job-end message repeat."""
    expire = config.redis.expire_hours
    return [f"cluster {c.name!r}: recent_hours = {c.recent_hours:g} keeps ended jobs in the "
            f"report longer than the bot remembers telling of them ([redis] expire_hours = "
            f"{expire:g}): after {expire:g} h their cleanup lines and job-end messages can repeat. "
            f"Set [redis] expire_hours to at least {c.recent_hours:g}, or lower recent_hours."
            for c in config.clusters if c.recent_hours > expire]


def _output_bound_warnings(config: Config) -> list[str]:
    """A SLURM cluster whose ``max_output_bytes`` is set below the floor the transport keeps
    (four times ``answer_budget_bytes``): the value set is not the bound used."""
    from probes.config import SlurmCluster
    from probes.slurm.runner import output_limit

    return [f"cluster {c.name!r}: max_output_bytes = {c.max_output_bytes} is below 4 x "
            f"answer_budget_bytes ({c.answer_budget_bytes}): the bound used is "
            f"{output_limit(c)} (lower answer_budget_bytes too for a lower bound)"
            for c in config.clusters if isinstance(c, SlurmCluster)
            and "max_output_bytes" in c.model_fields_set and output_limit(c) > c.max_output_bytes]


_ANY_TEXT = ("", "x", "Traceback (most recent call last):", "9\t;Z")
"""Texts with nothing in common: a pattern found in each of them is found in any text (``.*``,
``""``, ``opCount|``), where an anchored one (``^\\s*$``: a blank line) is not."""


def _pattern_warnings(config: Config) -> list[str]:
    """The configured regexes searched in what a job writes that may backtrack without bound
    (:func:`_backtracking`) or match everything (:data:`_ANY_TEXT`)."""
    places = [(f"cluster {c.name!r}: benign_patterns", getattr(c, "benign_patterns", ()),
               "every line: every fault in a log would be read as noise")
              for c in config.clusters]
    places.append(("[report] ablation_patterns", config.report.ablation_patterns or (),
                   "every job: none would ever be cancelled"))
    places += [(f"[buckets] {key}", getattr(config.buckets, key),
                f"every job name: a job no pattern before it claims is {key}")
               for key in ("rl", "sft", "datagen", "eval", "other", "side_tasks")]
    warnings = []
    for where, patterns, everything in places:
        for pattern in patterns:
            if all(re.search(pattern, text) for text in _ANY_TEXT):
                warnings.append(f"{where} {pattern!r} matches {everything}")
            elif (why := _backtracking(pattern, long_lines=not where.startswith("[buckets]"))
                  ) is not None:
                warnings.append(f"{where} {pattern!r} may backtrack without bound ({why}): one "
                                "line a job writes can hold the sweep, and the bot, for minutes "
                                "or for ever; rewrite it with at most one variable repeat (.* +) "
                                "and no repeat or choice inside a repeated group")
    return warnings


def _backtracking(pattern: str, *, long_lines: bool) -> str | None:
    """Why ``pattern`` may take time exponential in its text's length
    (``probes.kubernetes.recorded_patterns``): ``re`` holds the GIL while it matches, so one
    such log line stalls the sweep and the bot's event loop with it. Log lines (up to 64 KiB:
    ``benign_patterns``, ``ablation_patterns``) are long enough for two variable repeats, or
    one first and unanchored (``re.search`` runs it from every position), to cost seconds
    each; a job name (``[buckets]``, not ``long_lines``) is not, so only the
    exponential shapes count there. Not an error: the check is conservative (``(\\d+\\.)+``
    is linear)."""
    from probes.kubernetes.recorded_patterns import LEADING_REPEAT, MANY_REPEATS, unsafe_pattern

    why = unsafe_pattern(pattern)
    return None if why in (MANY_REPEATS, LEADING_REPEAT) and not long_lines else why
