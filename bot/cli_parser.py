"""The ``jobtables`` command line's grammar: its commands, options and their checks (CONTRACT §1).

Policy: bad usage is one line on stderr and exit 2 (:class:`OneLineParser`), never argparse's
usage block; every option a user types is checked here before anything runs (a width within
the config's bounds, a port number, one ``--cluster`` for one job). The commands themselves are
:mod:`bot.cli`'s; the ``--help`` text is the README's command table in short, and the two are
kept together (``tests/cli``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NoReturn

from bot.config import WIDTH_MAX, WIDTH_MIN

FORMATS = ("text", "json", "slack")
_CONFIG_HELP = "config file (default: $JOBTABLES_CONFIG, then ./jobtables.toml)"
_Commands = Any  # argparse's _SubParsersAction is private


class OneLineParser(argparse.ArgumentParser):
    """Bad usage is one line on stderr and exit 2 (CONTRACT §1): the error and where the help
    is, without argparse's usage block before it. Subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {line} (see {self.prog} --help)\n")


class OneCluster(argparse.Action):
    """``--cluster`` of ``job`` and ``probe``: one job is on one cluster, and ids overlap
    between clusters, so two different names are bad usage (argparse would keep the last)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest, None)
        if before is not None and before != values:
            parser.error(f"--cluster given twice ({before!r}, {values!r}): a job is on one "
                         "cluster; name it once (or use CLUSTER:ID)")
        setattr(namespace, self.dest, values)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: one subcommand per CONTRACT §1 command."""
    parser = OneLineParser(
        prog="jobtables",
        description="Sweep SLURM and Kubernetes ML jobs into box-drawing status tables "
                    "(RL, SFT, Datagen, Eval, Catch-all), and run the Slack bot.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_sweep_and_job(sub)
    _add_bot(sub)
    _add_demo_and_check(sub)
    _add_record(sub)
    _add_probe(sub)
    return parser


def _common(p: argparse.ArgumentParser, *, formats: bool = True) -> None:
    p.add_argument("--config", type=Path, default=None, help=_CONFIG_HELP)
    if formats:
        p.add_argument("--format", choices=FORMATS, default="text", help="output format")
        p.add_argument("--width", type=table_width, default=None,
                       help="table width in columns, 40-400 (default: config, 100)")


def _add_sweep_and_job(sub: _Commands) -> None:
    """``sweep`` and ``job``: a live report, of every job or of one."""
    p = sub.add_parser("sweep", help="one sweep over every active cluster; print the report")
    _common(p)
    p.add_argument("--cluster", action="append", default=None, metavar="NAME",
                   help="only this cluster (repeatable)")
    p = sub.add_parser("job", help="one job in depth: row, metric history, flags, log, advice")
    p.add_argument("id", metavar="ID", help="job id, or CLUSTER:ID")
    _common(p)
    p.add_argument("--cluster", action=OneCluster, default=None, metavar="NAME",
                   help="the job's cluster")


def _add_bot(sub: _Commands) -> None:
    p = sub.add_parser("bot", help="run the Slack bot (HTTP /slack/events, Socket Mode if "
                                   "SLACK_APP_TOKEN is set) and the scheduled sweeps")
    _common(p, formats=False)
    p.add_argument("--port", type=listen_port, default=3000,
                   help="HTTP port (default 3000; 0: a free port, printed on stderr at start)")


def _add_demo_and_check(sub: _Commands) -> None:
    """``demo`` (the bundled recording's report) and ``check-config``."""
    p = sub.add_parser("demo", help="a sweep over the bundled recorded cluster (no SSH, "
                                    "Slack or Redis needed)")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format")
    p.add_argument("--width", type=table_width, default=None,
                   help="table width in columns, 40-400 (default 100)")
    p = sub.add_parser("check-config", help="validate a config file; say what is wrong")
    _common(p, formats=False)


def _add_record(sub: _Commands) -> None:
    p = sub.add_parser(
        "record", help="capture a live SLURM or Kubernetes cluster (one sweep's reads) into a "
                       "replay directory",
        description="Capture one sweep of a live SLURM or Kubernetes cluster into DIR: what the "
                    "probe read, verbatim (SLURM: queue JSON, scontrol lines, log tails, "
                    "checkpoint listings, reduced trial results; Kubernetes: the Job, JobSet and "
                    "pod objects and each pod log read), for the selected jobs only. A cluster "
                    'with kind = "replay" and path = DIR sweeps it again, judged at the time it '
                    "was recorded.")
    p.add_argument("--cluster", required=True, metavar="NAME",
                   help="cluster to record (kind slurm or kubernetes)")
    p.add_argument("dir", type=Path, metavar="DIR",
                   help="directory to write (created 0700; an existing one must be empty or a "
                        "recording)")
    _common(p, formats=False)


def _add_probe(sub: _Commands) -> None:
    """``probe``: the deep probe of one RL run (issue 14)."""
    p = sub.add_parser("probe", help="deep-probe one RL run: read its literal rollouts (Harbor "
                                     "trials, rollout dumps, printed completions) and say KILL "
                                     "or NO-KILL with quoted evidence")
    p.add_argument("id", metavar="ID", help="job id, or CLUSTER:ID")
    p.add_argument("--config", type=Path, default=None, help=_CONFIG_HELP)
    p.add_argument("--cluster", action=OneCluster, default=None, metavar="NAME",
                   help="the job's cluster")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    p.add_argument("--width", type=table_width, default=None,
                   help="text width in columns, 40-400 (default: config, 100)")


def table_width(text: str) -> int:
    """``--width``: columns, within the bounds the config's ``[report] width`` has."""
    try:
        width = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of columns: {text!r}") from None
    if not WIDTH_MIN <= width <= WIDTH_MAX:
        raise argparse.ArgumentTypeError(
            f"{width} columns is outside {WIDTH_MIN}-{WIDTH_MAX}")
    return width


def listen_port(text: str) -> int:
    """``bot --port``: a TCP port, 0-65535 (0: the system picks a free one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is outside 0-65535")
    return port
