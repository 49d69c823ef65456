"""Only Harbor's passthrough exceptions are benign; trials that never started are infra.

Shape from an acceptance dry-run: an eval with 70/100 trials failing
``EnvironmentStartTimeoutError`` (``agent_result``/``verifier_result`` null, no agent phase:
sandboxes that never started) read healthy with "AgentTimeout share high; expected on hard
sets", because any exception with "timeout" in its name was taken for ``AgentTimeoutError``.
Every trial starts from a real Harbor 0.26.0 ``result.json`` (``tests/fixtures/harbor-0.26.0``);
the never-started variant is derived the way Harbor writes it (labelled below), and the tree goes
through the real collector and reducer on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probes.harbor import never_started, summarize_trials
from probes.models import JobFacts, TrialTree
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge, log, record, summary

REAL = (Path(__file__).resolve().parents[1] / "fixtures" / "harbor-0.26.0" / "jobs"
        / "2026-11-30__10-00-00" / "crack-7z-hash__LL53Qp2" / "result.json")
_NOTE = "AgentTimeouts on top: expected on hard sets"


def _never_started(data: dict[str, Any], exc: str = "EnvironmentStartTimeoutError") -> None:
    """Derived: the environment never came up; Harbor records the exception, no agent ran."""
    for key in ("agent_result", "verifier_result", "agent_setup", "agent_execution",
                "verifier"):
        data[key] = None
    data["exception_info"] = {"exception_type": exc,
                              "exception_message": "Environment start timed out after 600.0 s",
                              "exception_traceback": "Traceback (most recent call last):\n",
                              "occurred_at": data["finished_at"]}


def _scored_with(data: dict[str, Any], exc: str) -> None:
    """Derived: the agent ran and the verifier scored it, but an exception was recorded (how a
    passthrough exception such as AgentTimeoutError lands)."""
    data["exception_info"] = {"exception_type": exc, "exception_message": "",
                              "exception_traceback": "", "occurred_at": data["finished_at"]}
    data["verifier_result"]["rewards"] = {"reward": 0.0}


def _tree(tmp: Path, kinds: list[str]) -> TrialTree:
    job = tmp / "jobs" / "2026-12-03__17-30-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text("{}")
    for i, kind in enumerate(kinds):
        data = json.loads(REAL.read_text())
        if kind == "never":
            _never_started(data)
        elif kind != "real":
            _scored_with(data, kind)
        (job / f"t{i:04d}").mkdir()
        (job / f"t{i:04d}" / "result.json").write_text(json.dumps(data, indent=4))
    tree = trial_tree(collect_trials([str(tmp / "jobs")]))
    assert tree is not None and len(tree.trials) == len(kinds)
    return tree


def _eval(tree: TrialTree) -> JobFacts:
    return JobFacts(record=record("eval-qwen-tb"), log=log(text="eval\n"), summary=summary(),
                    trials=tree)


@pytest.mark.parametrize(
    ("never", "flagged"), [(70, True), (50, True), (49, False), (0, False)],
)
def test_trials_that_never_started_are_an_infra_problem(tmp_path: Path, never: int,
                                                        flagged: bool) -> None:
    """70/100 EnvironmentStartTimeoutError with null results: not the benign timeout share."""
    tree = _tree(tmp_path, ["never"] * never + ["real"] * (100 - never))
    stats = summarize_trials(tree)
    assert sum(never_started(t) for t in tree.trials) == never
    if never:
        assert stats.top_exception == "EnvironmentStartTimeoutError"
    report = judge(_eval(tree)).report
    assert _NOTE not in report.trend
    assert ("instant-fail" in report.flags) is flagged, report.trend
    if flagged:
        assert report.verdict == "warning"
        assert f"{never}/100" in report.trend and "EnvironmentStartTimeoutError" in report.trend
        assert report.recommendation is not None
        assert report.recommendation.action == "diagnose"
    else:
        assert report.verdict == "healthy", report.trend


@pytest.mark.parametrize(
    ("exc", "benign"),
    [("AgentTimeoutError", True), ("ContextLengthExceededError", True),
     ("VerifierTimeoutError", False), ("AgentSetupTimeoutError", False)],
)
def test_only_passthrough_exceptions_are_excused(tmp_path: Path, exc: str, benign: bool) -> None:
    """A majority of scored trials with a passthrough exception is expected (no flag, a note);
    a non-passthrough "...Timeout..." exception is never excused as one."""
    tree = _tree(tmp_path, [exc] * 60 + ["real"] * 40)
    detail = judge(_eval(tree))
    assert detail.report.metrics["top_exception"] == exc
    assert detail.report.flags == [] and detail.report.verdict == "healthy"
    assert ("on top: " in detail.note) is benign, detail.note
    assert (_NOTE in detail.report.trend) is (exc == "AgentTimeoutError")


ZERO = Path(__file__).resolve().parents[1] / "fixtures" / "harbor-0.26.0" / "zero-complete" / "jobs"


def test_datagen_whose_trials_never_started_is_not_generating() -> None:
    """A RUNNING datagen run over Harbor 0.26.0's real zero-complete job (16 trials, every one
    EnvironmentStartTimeoutError, no agent or verifier result) read 'Generating', verdict
    healthy, exc% 100 (replayed on the real SLURM): it generates nothing. Now instant-fail,
    warning, diagnose the environment provider, as an eval of the same trials."""
    tree = trial_tree(collect_trials([str(ZERO)]))
    assert tree is not None and len(tree.trials) == 16
    facts = JobFacts(record=record("datagen-tb-synth"), log=log(text="datagen running\n"),
                     summary=summary(), trials=tree)
    report = judge(facts).report
    assert report.bucket == "datagen"
    assert "instant-fail" in report.flags and report.verdict == "warning", report.trend
    assert "16/16" in report.trend and "EnvironmentStartTimeoutError" in report.trend
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


@pytest.mark.parametrize(("never", "flagged"), [(50, True), (49, False)])
def test_datagen_never_started_threshold(tmp_path: Path, never: int, flagged: bool) -> None:
    """The same half-of-the-window threshold as an eval's; below it the run generates."""
    tree = _tree(tmp_path, ["never"] * never + ["real"] * (100 - never))
    facts = JobFacts(record=record("datagen-tb-synth"), log=log(text="datagen running\n"),
                     summary=summary(), trials=tree)
    report = judge(facts).report
    assert ("instant-fail" in report.flags) is flagged, report.trend
    assert report.verdict == ("warning" if flagged else "healthy"), report.trend
