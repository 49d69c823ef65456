"""Multi-step Harbor trials (a task with ``steps``): each step runs the agent and records its
own agent context, exception and timings; the trial's own ``agent_result``,
``exception_info`` and ``agent_execution`` stay null (``harbor.trial.multi_step``).

Real fixtures: ``tests/fixtures/harbor-0.26.0/multi-step/`` serialised by Harbor 0.26.0's own
models (``tests/fixtures/generators/harbor_multi_step.py``): a trial whose second step timed
out (4 + 5 turns), a clean one (3 + 3) and a dead engine's (1 + 1, null output tokens).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from probes.harbor import build_trial_tree, summarize_trials
from probes.remote.harbor_reduce import reduce_trial
from probes.remote.trial_roots import collect_trials
from probes.slurm.assemble import trial_tree

STEPS = (Path(__file__).resolve().parents[1] / "fixtures" / "harbor-0.26.0" / "multi-step"
         / "2026-12-04__09-00-00")


def _reduced(task: str) -> dict[str, object]:
    path = next(STEPS.glob(f"{task}__*/result.json"))
    reduced = reduce_trial(path.read_text())
    assert reduced is not None
    return reduced


def test_a_step_exception_is_the_trials() -> None:
    """The step that timed out is the trial's exception (Harbor's ``recorded_exceptions``:
    the trial's own first, then each step's); exc% and the top exception count it."""
    assert _reduced("migrate-orm-models")["exception_type"] == "AgentTimeoutError"
    assert _reduced("split-monolith-service")["exception_type"] is None


def test_turns_and_tokens_come_from_the_steps() -> None:
    """Every step's turns and output tokens are the trial's (Harbor sums the steps' agent
    contexts, ``compute_token_cost_totals``); the agent phase spans the steps."""
    timed_out = _reduced("migrate-orm-models")
    assert timed_out["n_turns"] == 9
    assert timed_out["n_output_tokens"] == 7300
    assert timed_out["agent_started_at"] is not None
    assert timed_out["agent_finished_at"] is not None
    dead = _reduced("port-build-to-cmake")
    assert dead["n_turns"] == 2
    assert dead["n_output_tokens"] is None


@pytest.mark.parametrize("whole_run", [True, False])
def test_avg_turns_is_per_agent_run(tmp_path: Path, whole_run: bool) -> None:
    """avg_turns is the realness gate (seed: ~1.0 is a dead engine): each step is one agent
    run, so a dead engine's two-step trial averages 1.0 turn, not 2, and the run averages its
    steps' turns. The collector's whole-run tally and the per-record summary agree."""
    root = tmp_path / "jobs"
    shutil.copytree(STEPS, root / STEPS.name)
    tree = trial_tree(collect_trials([str(root)]))
    assert tree is not None
    if not whole_run:
        tree = tree.model_copy(update={"counts": None})
    stats = summarize_trials(tree)
    assert stats.avg_turns == pytest.approx((4 + 5 + 3 + 3 + 1 + 1) / 6)
    assert stats.top_exception == "AgentTimeoutError"
    assert stats.exc_pct == pytest.approx(100 / 3)
    dead = build_trial_tree(str(root), {"t": _reduced("port-build-to-cmake")})
    assert summarize_trials(dead).avg_turns == pytest.approx(1.0)


def test_the_deep_probe_reads_a_multi_step_trial_from_its_steps(tmp_path: Path) -> None:
    """The deep probe's sample (``probes.remote.rollouts``) reads a trial as the counts do:
    a dead engine's multi-step trial is its steps' agents running with no output token, and
    a step's exception is the trial's (its own fields are null in Harbor's result.json)."""
    from probes.remote.rollouts import collect_rollouts

    root = tmp_path / "jobs"
    shutil.copytree(STEPS, root / STEPS.name)
    answer = collect_rollouts({"trial_roots": [str(root)]})
    trials = {name.split("__")[0]: t for name, t in answer["trials"]["sampled"].items()}
    assert trials["migrate-orm-models"]["exception_type"] == "AgentTimeoutError"
    assert trials["migrate-orm-models"]["n_output_tokens"] == 7300
    dead = trials["port-build-to-cmake"]
    assert dead["n_output_tokens"] is None
    assert dead["agent_started_at"] is not None and dead["agent_finished_at"] is not None
    assert dead["n_turns"] == 2
