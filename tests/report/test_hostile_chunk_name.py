"""A hung chunk's name (its job dir's path below the trial root, 2e9d9bf) is the cluster
user's text, quoted in the Trend and the recommendation: a directory name may hold a line
break, an escape sequence, a bidi override or mrkdwn. The text table keeps its box, no control
character reaches the terminal, and Slack gets it escaped (no mention, no link)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from report.chunks import slack_messages
from report.models import JobDetail
from report.render import job_detail_pieces, render_job_detail, render_text
from tests.report.factories import judge, report_of
from tests.report.test_harbor_chunk_owner import _quiet_task
from tests.report.test_harbor_dryrun_datagen import MAKE

HOSTILE = "chunk-000\n<!channel> *x* &amp;\x1b[31mred\u202e"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def _detail(tmp_path: Path) -> JobDetail:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "qwen3-8b" / HOSTILE, {"pass": 5, "fail": 10, "inflight": 8}, total=100,
               seed=62, minutes_ago=240, mtime_ago_min=200)
    MAKE.write(jobs / "qwen3-8b" / "chunk-001", {"pass": 20, "fail": 30, "inflight": 8},
               total=100, seed=63)
    now = datetime.now(UTC)
    detail = judge(_quiet_task(jobs, now), now=now)
    rec = detail.report.recommendation
    assert "stall" in detail.report.flags and rec is not None and "qwen3-8b/chunk-000" in rec.why
    return detail


def test_the_text_table_keeps_its_box_and_no_control_character(tmp_path: Path) -> None:
    detail = _detail(tmp_path)
    text = render_text(report_of(detail.report),
                       {(detail.report.cluster, detail.report.job_id): detail})
    rows = [line for line in text.splitlines() if line and line[0] in "┌│├└"]
    assert rows and len({len(line) for line in rows}) == 1, text
    assert not _CONTROL.search(text), repr(text)
    assert not _CONTROL.search(render_job_detail(detail))


def test_slack_gets_the_name_escaped(tmp_path: Path) -> None:
    detail = _detail(tmp_path)
    bodies = [m.text + "".join(str(b) for b in m.blocks)
              for m in slack_messages(job_detail_pieces(detail, width=100))]
    body = "".join(bodies)
    assert "<!channel>" not in body and "&lt;!channel&gt;" in body, body
    assert "&amp;amp;" in body and not _CONTROL.search(body), repr(body)
