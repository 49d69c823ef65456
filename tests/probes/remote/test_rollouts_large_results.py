"""The deep probe reads Harbor trials whose result.json is past 1 MiB (bounded).

terminus-2's ``collect_rollout_details`` (SkyRL's Harbor generator, an RL run's own trials)
records every turn's prompt token ids in ``agent_result.rollout_details``: a trial's
result.json runs to megabytes (7.5 MB seen). The deep probe read each to its first 1 MiB
(``max_file_bytes``), which no JSON parser reads, so such a trial gave the probe nothing: no
reward, no exception, no tokens, and in a flat trials dir of them no trial at all. f930d38
fixed the sweep's count; the probe is the reader the KILL/NO-KILL verdict rests on.
"""

from __future__ import annotations

import json
from pathlib import Path

from probes.config import ReadPlan
from probes.remote import harbor_reduce
from probes.remote.rollout_budget import DEFAULTS
from probes.remote.rollouts import collect_rollouts
from tests.probes.remote.test_trial_large_results import _inflate
from tests.report.test_harbor_dryrun_datagen import MAKE


def _job(tmp: Path) -> Path:
    job = tmp / "jobs" / "2026-12-04__22-30-00"
    MAKE.write(job, {"pass": 2, "timeout": 2}, total=4, seed=11)
    for path in sorted(job.glob("*/result.json")):
        _inflate(path)
    return job


def test_large_trial_results_give_the_probe_their_verdict_fields(tmp_path: Path) -> None:
    job = _job(tmp_path)
    answer = collect_rollouts({"trial_roots": [str(tmp_path / "jobs")]})
    sampled = answer["trials"]["sampled"]
    assert len(sampled) == 4
    expected = {}
    for trial in sorted(p for p in job.iterdir() if p.is_dir()):
        data = json.loads((trial / "result.json").read_text())
        expected[trial.name] = (data["verifier_result"]["rewards"]["reward"],
                                (data["exception_info"] or {}).get("exception_type"),
                                float(data["agent_result"]["n_output_tokens"]))
    got = {name: (t["reward"], t["exception_type"], t["n_output_tokens"])
           for name, t in sampled.items()}
    assert got == expected
    assert sorted(e for _, e, _ in got.values() if e) == ["AgentTimeoutError"] * 2


def test_a_flat_trials_dir_of_large_results_is_sampled(tmp_path: Path) -> None:
    """SkyRL's flat ``trials_dir`` (no Harbor job dir above) of such trials."""
    job = _job(tmp_path)
    flat = tmp_path / "trials"
    flat.mkdir()
    for trial in sorted(p for p in job.iterdir() if p.is_dir()):
        trial.rename(flat / trial.name)
    answer = collect_rollouts({"trial_roots": [str(flat)]})
    assert len(answer["trials"]["sampled"]) == 4


def test_a_result_past_the_bound_is_skipped_and_said(tmp_path: Path) -> None:
    """The read stays bounded: past ``max_result_bytes`` nothing is parsed, and it is said."""
    _job(tmp_path)
    answer = collect_rollouts({"trial_roots": [str(tmp_path / "jobs")],
                               "max_result_bytes": 1 << 20})
    assert answer["trials"]["sampled"] == {}
    assert any("past" in s and "result.json" in s for s in answer["skipped"])
    assert answer["bytes_read"] <= 4 * (1 << 20) + (1 << 20)


def test_rollout_details_are_cut_before_parsing() -> None:
    """The token ids are dropped from the text, never built as Python lists; strings that
    merely quote the key and the rest of the document are left alone."""
    doc = {"agent_result": {"n_output_tokens": 5, "rollout_details": [
        {"prompt_token_ids": [[1, 2, 3], [4, 5]], "logprobs": [[-0.5, -1e-3]],
         "extra": "a ] tricky \" } string"}],
        "metadata": {"n_episodes": 2, "all_messages": [
            {"role": "assistant", "content": "my \"rollout_details\": [1] are fine"}]}},
        "verifier_result": {"rewards": {"reward": 1.0}}}
    raw = json.dumps(doc, indent=4).encode()
    slim = json.loads(harbor_reduce.slim_result(raw))
    assert slim["agent_result"]["rollout_details"] is None
    assert slim["agent_result"]["metadata"] == doc["agent_result"]["metadata"]
    assert slim["verifier_result"] == doc["verifier_result"]
    assert harbor_reduce.slim_result(b'{"rollout_details": [1, 2') == b'{"rollout_details": [1, 2'


def test_the_config_read_plan_sets_the_bound(tmp_path: Path) -> None:
    """``[deep_probe.plan] max_result_bytes`` reaches the login-node reader as the probe sends
    its plan (``probes.deep_read``: the plan's fields are the request's limits)."""
    _job(tmp_path)
    assert ReadPlan().max_result_bytes == DEFAULTS["max_result_bytes"]
    limits = ReadPlan(max_result_bytes=1 << 20).model_dump(
        exclude={"rollout_dirs", "validation_dirs"})
    answer = collect_rollouts({**limits, "trial_roots": [str(tmp_path / "jobs")]})
    assert answer["trials"]["sampled"] == {}
