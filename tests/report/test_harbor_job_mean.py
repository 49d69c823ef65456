"""A datagen row's Mean is Harbor's own where Harbor wrote one: its job result.json's
``stats.evals[*].metrics[0].mean``, which Harbor rewrites as each trial ends.

Harbor versions count a trial the verifier never scored (its sandbox never started)
differently: 0.26 left it out, later versions count it 0 (``harbor/metrics/mean.py`` takes a
``None`` reward as 0, and ``Job`` passes one per trial). Where the progress line is one chunk's
(a run of several Harbor job dirs), the row showed our own arithmetic, which leaves unscored
trials out, so with a later Harbor it read higher than anything Harbor printed. The trees are
Harbor's layout from ``tests/fixtures/harbor-dryrun/make_tree.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts


def _chunks(jobs: Path) -> list[str]:
    """Two chunks, each with trials whose sandbox never started; their progress lines."""
    mixes = [{"pass": 9, "fail": 11, "never": 5}, {"pass": 3, "fail": 9, "never": 8}]
    lines = []
    for i, mix in enumerate(mixes):
        out = MAKE.write(jobs / f"chunk-{i:03d}", mix, total=40, seed=i + 7, finished=i == 0)
        lines.append(MAKE.progress_line(out["done"], out["total"], out["mean"]))
    return lines


def test_a_chunked_runs_mean_is_harbors_over_its_chunks(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    lines = _chunks(jobs)
    report = judge(_facts(jobs, "\n".join(lines) + "\n", "datagen-tb-synth"),
                   now=datetime.now(UTC)).report
    harbor = 12 / 45  # every finished trial, an unscored one counting 0, as Harbor's Mean
    ours = 12 / 32  # the scored trials only
    mean = report.metrics.get("mean_reward")
    assert isinstance(mean, float) and abs(mean - harbor) < 1e-9, (mean, harbor, ours)
    assert report.metrics.get("trials") == 45.0


def test_the_tree_carries_harbors_mean_weighted_by_completed_trials(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    _chunks(jobs)
    tree = trial_tree(collect_trials([str(jobs)]))
    assert tree is not None and tree.job_mean is not None
    assert abs(tree.job_mean - 12 / 45) < 1e-9


def test_without_a_result_json_mean_the_trials_give_it(tmp_path: Path) -> None:
    """Near-miss: a chunk whose job result.json has no metric yet (Harbor 0.26 wrote it at
    the end only) leaves the Mean to the trials, as before."""
    jobs = tmp_path / "jobs"
    lines = _chunks(jobs)
    path = jobs / "chunk-001" / "result.json"
    body = json.loads(path.read_text())
    for value in body["stats"]["evals"].values():
        value["metrics"] = []
    path.write_text(json.dumps(body))
    tree = trial_tree(collect_trials([str(jobs)]))
    assert tree is not None and tree.job_mean is None
    report = judge(_facts(jobs, "\n".join(lines) + "\n", "datagen-tb-synth"),
                   now=datetime.now(UTC)).report
    mean = report.metrics.get("mean_reward")
    assert isinstance(mean, float) and abs(mean - 12 / 32) < 1e-9, mean


def _edit_stats(path: Path, edit: object) -> None:
    body = json.loads(path.read_text())
    edit(body["stats"])  # type: ignore[operator]
    path.write_text(json.dumps(body))


def test_a_job_of_several_evals_or_no_completed_count_gives_no_mean(tmp_path: Path) -> None:
    """Review of 2c5b77f: a chunk's first eval's mean is not its job's when it ran several
    agents or models, and a mean without a completed count cannot be weighted: the trials
    give the Mean then."""
    jobs = tmp_path / "jobs"
    _chunks(jobs)
    path = jobs / "chunk-001" / "result.json"

    def second_eval(stats: dict) -> None:
        (key, value), = stats["evals"].items()
        stats["evals"][key + "-other-model"] = json.loads(json.dumps(value))

    _edit_stats(path, second_eval)
    tree = trial_tree(collect_trials([str(jobs)]))
    assert tree is not None and tree.job_mean is None
    _chunks(jobs)  # rewritten whole: one eval again
    _edit_stats(path, lambda stats: stats.update(n_completed_trials=0))
    tree = trial_tree(collect_trials([str(jobs)]))
    assert tree is not None and tree.job_mean is None
