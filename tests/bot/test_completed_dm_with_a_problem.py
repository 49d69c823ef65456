"""A job that COMPLETED but whose run went wrong is not told as a plain success.

Found by the quiet dry run: an SFT job whose loss went NaN ended COMPLETED (the trainer exits
0); its row read recommendation ``diagnose`` ('Loss → NaN'), but the owner's job-end DM began
'✅ sft-trust-nan completed.', the same headline as a clean run, with the diagnosis one line
below. A completed run short of its total (``incomplete-run``) read the same. The headline now
says the run completed with a problem; a clean completion keeps its ✅. An RL run that
completed on a collapsed policy is no plain success either (``test_completed_collapse``).
"""

from __future__ import annotations

import math

from bot.alert_messages import job_end_dm
from probes.models import JobState
from report.changes import Change
from tests.report.factories import facts, healthy_rl, judge, points, record, with_last


def _finished(detail_name: str, job_id: str, series: dict[str, list[float | None]],
              **summary_kw: object) -> tuple[str, str]:
    detail = judge(facts(record(detail_name, job_id, JobState.COMPLETED), points(series),
                         summary_kw=summary_kw))
    change = Change(kind="finished", cluster="alpha", job_id=job_id, name=detail_name,
                    state=JobState.COMPLETED, verdict=detail.report.verdict,
                    why=detail.report.trend)
    rec = detail.report.recommendation
    return job_end_dm(change, detail).text, rec.action if rec else "none"


def test_a_completed_run_whose_loss_went_nan_is_not_told_as_a_success() -> None:
    text, action = _finished("sft-nan", "41", {"loss": [1.0, 0.9, 0.8, 0.7, 0.6, math.nan]})
    assert action == "diagnose"
    head = text.splitlines()[0]
    assert not head.startswith("✅"), text
    assert "completed" in head and "sft-nan" in head, text
    assert "diagnose" in text, text


def test_a_clean_completion_keeps_its_tick() -> None:
    text, action = _finished("sft-clean", "42", {"loss": [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]})
    assert action != "diagnose"
    assert text.splitlines()[0].startswith("✅ "), text


def test_a_run_completed_on_a_collapse_is_not_told_as_a_success() -> None:
    series = healthy_rl(grad_norm=with_last([0.2] * 12, 3.1), entropy=with_last([0.5] * 12, 0.24))
    text, action = _finished("rl-collapsed", "43", series)
    assert action == "diagnose"
    head = text.splitlines()[0]
    assert not head.startswith("✅") and "needs a look" in head, text
