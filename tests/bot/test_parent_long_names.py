"""The period's parent message names a 150-character job shortened, and escaped for mrkdwn.

Its one-line bucket summaries used to repeat the whole name for each job named (up to three
per verdict); now a long name keeps its start and end around ``…``
(``report.sweep_summary.short_names``), and the shortened name is escaped like any outside
text: a ``<!channel>`` or ``*`` in it neither pings nor formats.
"""

from __future__ import annotations

from bot.messages import sweep_parent
from tests.bot.builders import T0, detail, job, sweep_result

LONG = "rl-<!channel>-*bold*-" + "-".join(f"opt{i}" for i in range(30)) + "-seed7"


def test_a_long_name_is_shortened_and_escaped_in_the_parent() -> None:
    assert len(LONG) > 150
    result = sweep_result([detail(job("1", LONG, verdict="collapse"))])
    text = sweep_parent(result, period_start=T0, now=T0, period_hours=24, sweeps=1).text
    (line,) = [row for row in text.splitlines() if row.startswith("RL:")]
    assert "opt15" not in line and "…" in line and "seed7" in line, line
    assert "<!channel>" not in line and "&lt;!channel&gt;" in line, line
    assert len(line) < 100, line
