"""check-config warns of a configured regex that may backtrack without bound on the text it is
searched in. Found probing check-config with malformed configs: ``benign_patterns =
["(a+)+$"]`` printed OK, yet that pattern is searched in every line of every log tail, and one
line of 40 ``a`` and a ``!`` (a job's own output) holds the sweep for hours; ``re`` keeps the
GIL while it matches, so the bot's event loop (Slack acks, /healthz) stalls with it. A log
line is up to 64 KiB, so two variable repeats (``.*foo.*bar``: quadratic) cost seconds per line
there; a job name is short, so on ``[buckets]`` only the exponential shapes are named. A
pattern matching the empty string matches everything: that is warned too."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main

CLUSTER = '[[clusters]]\nname = "alpha"\nkind = "slurm"\nlocal = true\n'


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str]:
    path = tmp_path / "jobtables.toml"
    path.write_text(text)
    code = main(["check-config", "--config", str(path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("text", "expected"), [
    (CLUSTER + 'benign_patterns = ["NCCL INFO", "(a+)+$"]\n',
     "cluster 'alpha': benign_patterns '(a+)+$' may backtrack without bound (a repeat inside "
     "a repeat)"),
    (CLUSTER + 'benign_patterns = [".*foo.*bar"]\n',
     "cluster 'alpha': benign_patterns '.*foo.*bar' may backtrack without bound (more than "
     "one variable repeat)"),
    (CLUSTER + '[buckets]\nrl = ["^rl-", "^(a|ab)*$"]\n',
     "[buckets] rl '^(a|ab)*$' may backtrack without bound (a choice under a repeat)"),
    (CLUSTER + '[buckets]\nrl = ["^rl-", "^(a?a?)+$"]\n',
     "[buckets] rl '^(a?a?)+$' may backtrack without bound (a repeat inside a repeat)"),
    (CLUSTER + '[buckets]\nrl = ["^rl-", "^' + "a?" * 12 + "a" * 12 + '$"]\n',
     "may backtrack without bound (more than 4 optional repeats)"),
    (CLUSTER + 'benign_patterns = ["\\\\d+ms"]\n',
     "cluster 'alpha': benign_patterns '\\\\d+ms' may backtrack without bound (a variable "
     "repeat first, unanchored)"),
    (CLUSTER + '[report]\nablation_patterns = ["loss_mode=.*clip.*"]\n',
     "[report] ablation_patterns 'loss_mode=.*clip.*' may backtrack without bound (more than "
     "one variable repeat)"),
    (CLUSTER + '[report]\nablation_patterns = ["(x+)+y"]\n',
     "[report] ablation_patterns '(x+)+y' may backtrack without bound (a repeat inside a "
     "repeat)"),
])
def test_a_pattern_that_may_backtrack_without_bound_is_warned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str) -> None:
    """The file is valid (exit 0, OK) but the warning names where the pattern is and why."""
    code, err = _check(tmp_path, capsys, text)
    assert code == 0
    assert expected in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("text", [
    CLUSTER + 'benign_patterns = ["NCCL INFO .* opCount", "^\\\\s*$", "(?:WARN|INFO) x"]\n',
    CLUSTER + '[buckets]\nrl = ["^rl-.*-grpo-.*", ".*grpo"]\n',
    CLUSTER,
    # An optional (at most one) multiplies nothing by a line's length: the rulebook's benign
    # heartbeat and README's ablation example are one variable repeat or none.
    CLUSTER + 'benign_patterns = ["no available block found in \\\\d+ seconds?"]\n'
    '[report]\nablation_patterns = ["spike[-_]?mitig", "skip[-_]?spikes?"]\n',
])
def test_bounded_patterns_and_the_defaults_are_quiet(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    """Near-misses: one variable repeat (README's example), two on a job name, the built-in
    buckets and ablation patterns, optionals (``?``) beside a repeat."""
    assert _check(tmp_path, capsys, text) == (0, "")


@pytest.mark.parametrize(("text", "expected"), [
    (CLUSTER + 'benign_patterns = ["NCCL INFO", "opCount|"]\n',
     "cluster 'alpha': benign_patterns 'opCount|' matches every line: every fault in a log "
     "would be read as noise"),
    (CLUSTER + '[buckets]\nsft = ["^sft-", ""]\n',
     "[buckets] sft '' matches every job name: a job no pattern before it claims is sft"),
    (CLUSTER + '[report]\nablation_patterns = [".*"]\n',
     "[report] ablation_patterns '.*' matches every job: none would ever be cancelled"),
])
def test_a_pattern_that_matches_everything_is_warned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str) -> None:
    """A pattern matching the empty string matches every text it is searched in: a benign
    pattern then hides every traceback, an ablation pattern exempts every run from the
    collapse rule's cancel. Valid regexes, so a warning."""
    code, err = _check(tmp_path, capsys, text)
    assert code == 0
    assert expected in err, err
