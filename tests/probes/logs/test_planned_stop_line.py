"""The planned-stop line: a trainer saying it stopped ahead of its time budget.

Strings as the trainers print them (NVIDIA-NeMo/RL ``nemo_rl/algorithms/grpo.py`` and its
SFT/DPO/distillation loops: ``print("Timeout has been reached, stopping training early",
flush=True)``; NVIDIA/Megatron-LM ``megatron/training/training.py``: ``print_datetime('exiting
program after {} minutes'.format(train_time))`` and ``print_datetime('exiting program at
iteration {}'.format(iteration))``, where ``print_datetime`` prints ``[{string}] datetime:
{time} ``). The summary's field must be the same from a cold parse and from the bot's
incremental fold, cut anywhere (``test_incremental`` folds every fixture; these check the line
itself, and a fold whose line arrives alone or unfinished).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.logs.incremental import LogCarry, parse_increment
from probes.logs.parse import _parse_reference, parse_log
from probes.logs.planned_stop import read_planned_stop
from probes.models import PlannedStop

FIXTURES = Path(__file__).parents[2] / "fixtures"
NEMO = FIXTURES / "nemo-rl-rebuilt" / "grpo_timeout.log"
MEGATRON = FIXTURES / "megatron-rebuilt" / "exit_duration.log"


@pytest.mark.parametrize(
    ("line", "text"),
    [
        ("Timeout has been reached, stopping training early",
         "Timeout has been reached, stopping training early"),
        ("[exiting program after 239.01666666666668 minutes] datetime: 2026-11-30 14:00:02 ",
         "exiting program after 239 minutes"),
        ("[default0]:[exiting program at iteration 6000] datetime: 2026-08-25 19:54:10",
         "exiting program at iteration 6000"),
        ("exiting program at iteration 150", "exiting program at iteration 150"),
        # not a budget: a signal (indistinguishable from scancel), or no number at all
        ("[exiting program after receiving SIGTERM.] datetime: 2026-08-25 19:54:10", None),
        ("exiting program after the job was cancelled", None),
        ("Max number of steps has been reached, stopping training early", None),
    ],
)
def test_lines(line: str, text: str | None) -> None:
    """Each trainer's line is read in its words; its siblings are not."""
    found = read_planned_stop([line], 7)
    assert (found.text if found else None) == text
    assert read_planned_stop([line], 7, gated=False) == found
    if found is not None:
        assert found.line_no == 7


@pytest.mark.parametrize("path", [NEMO, MEGATRON], ids=["nemo-rl", "megatron"])
def test_fixture_summary_names_the_last_line(path: Path) -> None:
    """The summary holds the last line, numbered as its steps; reference and fast agree."""
    text = path.read_bytes()
    lines = text.decode().splitlines()
    fast = parse_log(text, first_line_no=5)
    assert fast.planned_stop == PlannedStop(line_no=len(lines) + 4,
                                            text=read_planned_stop(lines[-1:]).text)  # type: ignore[union-attr]
    assert _parse_reference(text, first_line_no=5).planned_stop == fast.planned_stop
    assert fast.points[-1].line_no is not None
    assert fast.points[-1].line_no < fast.planned_stop.line_no  # type: ignore[union-attr]


def test_fold_keeps_the_line_across_reads_and_through_json() -> None:
    """Read in increments (the line alone, unfinished, then closed, then more noise), the
    carry through JSON between reads: the cold parse's field at every read."""
    whole = NEMO.read_bytes()
    head, line = whole[:-51], whole[-51:]
    chunks = [head, line[:20], line[20:-1], line[-1:], b"ray: shutting down\n"]
    carry: LogCarry | None = None
    seen = b""
    for chunk in chunks:
        summary, carry = parse_increment(carry, chunk)
        carry = LogCarry.model_validate_json(carry.model_dump_json())
        seen += chunk
        assert summary.planned_stop == parse_log(seen).planned_stop
    assert summary.planned_stop is not None


def test_a_later_line_replaces_an_earlier_one() -> None:
    """Two stops in one log (a chain appending to it): the last is the summary's."""
    text = NEMO.read_text() + "\n" + MEGATRON.read_text()
    data = text.encode()
    summary, _ = parse_increment(parse_increment(None, data[:2000])[1], data[2000:])
    assert summary.planned_stop == parse_log(text).planned_stop
    assert summary.planned_stop is not None
    assert summary.planned_stop.text == "exiting program after 40 minutes"
