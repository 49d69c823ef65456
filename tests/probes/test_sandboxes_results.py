"""``sandboxes``, Harbor's predecessor: its trial and job ``result.json`` shapes.

``tests/fixtures/sandboxes-ac17d9e/jobs/2025-10-06__12-00-00/`` (generators/sandboxes_results.py:
sandboxes' pydantic models copied from its source at ``ac17d9e``): a terminus-2 eval of 12
trials, 5 solved, 3 failed, 2 ``AgentTimeoutError`` and 1 ``ContextLengthExceededError`` (both
graded 0), 1 ``EnvironmentStartTimeoutError`` (never graded). Its ``VerifierResult`` is one
``reward`` (Harbor's ``rewards`` dict came later) and its job result carries the Mean as a
top-level ``metrics: [{"name": "accuracy", "value": ...}]``. Every trial read as unscored (no
reward, pass-rate and Mean unknown) and the job's Mean as none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.harbor import summarize_trials
from probes.remote.harbor_reduce import reduce_job, reduce_trial
from tests.probes.test_harbor import read_trial_tree

JOB = (Path(__file__).resolve().parents[1] / "fixtures" / "sandboxes-ac17d9e" / "jobs"
       / "2025-10-06__12-00-00")


def test_a_trials_one_reward_is_its_reward() -> None:
    """Each trial's ``verifier_result.reward`` equals its verifier's reward.txt; the trial
    that never started has neither."""
    checked = 0
    for result in JOB.glob("*/result.json"):
        reward_txt = result.parent / "verifier" / "reward.txt"
        expected = float(reward_txt.read_text()) if reward_txt.exists() else None
        reduced = reduce_trial(result.read_bytes())
        assert reduced is not None and reduced["reward"] == expected, result.parent.name
        checked += 1
    assert checked == 12


def test_the_tree_reads_pass_rate_mean_and_turns() -> None:
    """12 trials, 11 graded, 5 solved: pass-rate 5/12 (solved over the trials with a
    result, the one never started among them), mean 5/11 over the graded; the timeouts and
    the overflow are exceptions of graded trials."""
    stats = summarize_trials(read_trial_tree(JOB))
    assert stats.completed == 12
    assert stats.pass_rate == pytest.approx(5 / 12)
    assert stats.mean_reward == pytest.approx(5 / 11)
    assert stats.exceptions == {"AgentTimeoutError": 2, "ContextLengthExceededError": 1,
                                "EnvironmentStartTimeoutError": 1}
    assert stats.avg_turns is not None and 3 <= stats.avg_turns <= 9


def test_the_job_results_metric_is_its_mean() -> None:
    """The job result's first top-level metric is the Mean sandboxes showed; its old stats
    names give the counts."""
    reduced = reduce_job((JOB / "result.json").read_bytes())
    assert reduced is not None
    assert reduced["mean"] == pytest.approx(5 / 12)
    assert (reduced["n_total_trials"], reduced["n_completed"], reduced["n_errored"]) == (12, 12, 4)
