"""Harbor result.json files past 1 MiB are counted (rulebook: Trials = result.json count).

A trial run with terminus-2's ``collect_rollout_details`` (SkyRL's Harbor generator, datagen
for training traces) records every turn's full prompt token ids in
``agent_result.rollout_details``: tens of turns of long prompts are megabytes. The collector
read each result.json's first 1 MiB, which no JSON parser reads, so such a trial was not
counted at all (7 of 10 trials, its reward and exception lost), and a trials dir holding only
such trials was not recognised. A large eval's job result.json lists every trial's name in its
``reward_stats`` (about 60 bytes a trial): past ~17k trials its total was lost.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import pytest

import probes.remote.trial_roots
from probes.harbor import summarize_trials
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.test_harbor_dryrun_datagen import MAKE


def _inflate(result: Path, turns: int = 40, prompt: int = 6000) -> None:
    """Give a trial terminus-2's rollout details: every turn's prompt ids (the whole history)."""
    data = json.loads(result.read_text())
    ids = list(range(prompt))
    data["agent_result"]["rollout_details"] = [{
        "prompt_token_ids": [ids] * turns,
        "completion_token_ids": [[7] * 300] * turns,
        "logprobs": [[-0.25] * 300] * turns,
    }]
    result.write_text(json.dumps(data, indent=4))
    assert result.stat().st_size > 1 << 20


def test_large_trial_results_are_counted_and_read(tmp_path: Path) -> None:
    job = tmp_path / "jobs" / "2026-12-04__21-00-00"
    MAKE.write(job, {"pass": 4, "fail": 3, "timeout": 3}, total=10, seed=5)
    big = sorted(job.glob("*/result.json"))[:3]
    for path in big:
        _inflate(path)
    stats = summarize_trials(trial_tree(collect_trials([str(tmp_path / "jobs")])))
    assert stats.trials == 10
    assert stats.pass_rate == 0.4
    assert stats.exceptions == {"AgentTimeoutError": 3}


def test_a_flat_trials_dir_of_large_results_is_recognised(tmp_path: Path) -> None:
    """SkyRL's flat ``trials_dir`` (trial dirs with no Harbor job dir above)."""
    job = tmp_path / "made"
    MAKE.write(job, {"pass": 2, "fail": 2}, total=4, seed=6)
    flat = tmp_path / "trials"
    flat.mkdir()
    for trial in sorted(p for p in job.iterdir() if p.is_dir()):
        trial.rename(flat / trial.name)
        _inflate(flat / trial.name / "result.json", turns=30)
    tree = trial_tree(collect_trials([str(flat)]))
    assert tree is not None
    assert summarize_trials(tree).trials == 4


def test_a_large_job_result_keeps_its_total(tmp_path: Path) -> None:
    job = tmp_path / "jobs" / "2026-12-04__21-00-00"
    MAKE.write(job, {"pass": 2, "fail": 2, "inflight": 2}, total=30000, seed=7)
    data = json.loads((job / "result.json").read_text())
    stats = next(iter(data["stats"]["evals"].values()))
    stats["reward_stats"] = {"reward": {"0.0": [f"task-{i:05d}__abcdefg" for i in range(24000)]}}
    (job / "result.json").write_text(json.dumps(data, indent=4))
    assert (job / "result.json").stat().st_size > 1 << 20
    tree = trial_tree(collect_trials([str(tmp_path / "jobs")]))
    assert tree is not None and tree.trials_total == 30000


def test_a_result_past_the_read_bound_still_counts(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``RESULT_BYTES`` a trial is counted, finished, its fields unknown (not dropped)."""
    monkeypatch.setattr(probes.remote.trial_roots, "RESULT_BYTES", 1 << 20)
    job = tmp_path / "jobs" / "2026-12-04__21-00-00"
    MAKE.write(job, {"pass": 4, "fail": 6}, total=10, seed=5)
    for path in sorted(job.glob("*/result.json"))[:2]:
        _inflate(path)
    stats = summarize_trials(trial_tree(collect_trials([str(tmp_path / "jobs")])))
    assert (stats.trials, stats.completed) == (10, 10)


def test_reducing_a_large_trial_never_builds_its_token_ids(tmp_path: Path) -> None:
    """The collector parses each result.json whole (up to ``RESULT_BYTES``): its rollout
    details' token ids, parsed, are Python objects at twice the file's size and more (9.5 MB
    for a 4.4 MB result); cut from the text first, the reduction allocates a fraction of it."""
    job = tmp_path / "jobs" / "2026-12-04__21-00-00"
    MAKE.write(job, {"pass": 1}, total=1, seed=8)
    [path] = sorted(job.glob("*/result.json"))
    data = json.loads(path.read_text())
    rng = random.Random(1)
    data["agent_result"]["rollout_details"] = [{
        "prompt_token_ids": [[rng.randrange(150000) for _ in range(150 * t)] for t in range(40)],
        "logprobs": [[-0.25] * 300] * 40,
    }]
    raw = json.dumps(data, indent=4).encode()
    tracemalloc.start()
    try:
        reduced = probes.remote.trial_roots._reduced_trial((raw, 0.0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reduced is not None and reduced["reward"] == 1.0
    assert peak < len(raw) // 4, (peak, len(raw))
