"""Rulebook: completion -> the matching cleanup routine, and the SFT completion check.

Logs are the fixtures' real formats: verl 0.9.1 console (real formatter), TRL 1.16 GRPO (real
library), SkyRL + Harbor generator (rebuilt from source, with Harbor's passthrough lines), HF
Trainer 5.24 SFT (real library); completion files from ``hf-trainer-state-rebuilt`` (rebuilt from
the HF Trainer / LLaMA-Factory source). The object-store config line is reconstructed from
SkyRL's ``harbor_trial_config`` (``trials_dir``) with an ``s3://`` URI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probes.logs.parse import parse_log
from probes.models import (
    CompletionCheck,
    CompletionFile,
    JobFacts,
    JobState,
    TrialTree,
)
from probes.remote.completion import parse_trainer_log_jsonl, parse_trainer_state_json
from report.cleanup import object_store_trials
from tests.report.factories import judge, log, record, tree, trial

FIX = Path(__file__).resolve().parents[1] / "fixtures"
VERL = (FIX / "verl-0.9.1" / "console.log").read_text()
TRL = (FIX / "trl-1.16.0" / "grpo_healthy.out").read_text()
SKYRL_HARBOR = (FIX / "skyrl-rebuilt" / "console_v04.log").read_text()
S3_CONFIG = "  trials_dir: s3://team-rl/agentic/trials\n"
SFT = (FIX / "hf-transformers-5.24.0" / "sft_healthy.out").read_text()
STATES = FIX / "hf-trainer-state-rebuilt"
FULL_TREE = tree([trial(), trial(name="u")])
EMPTY_TREE = TrialTree(root="/w/jobs", exists=True)


def _completed(name: str, text: str, *, trials: TrialTree | None = None,
               completion: CompletionCheck | None = None, **rec: Any) -> JobFacts:
    return JobFacts(record=record(name, state=JobState.COMPLETED, **rec),
                    log=log(text=text), summary=parse_log(text), trials=trials,
                    completion=completion)


@pytest.mark.parametrize(
    ("name", "text", "trials", "rec", "expected"),
    [
        # standard RL: no agent anywhere in the run, even with a stray trial tree on disk
        ("rl-verl-gsm8k", VERL, None, {}, ("rl-standard-job-cleanup", False)),
        ("rl-verl-gsm8k", VERL, FULL_TREE, {}, ("rl-standard-job-cleanup", False)),
        ("rl-trl-grpo", TRL, None, {}, ("rl-standard-job-cleanup", False)),
        # agentic by the log (Harbor generator lines), by the batch command, by a label
        ("rl-skyrl-tb", SKYRL_HARBOR, FULL_TREE, {}, ("rl-agentic-job-cleanup", True)),
        ("rl-skyrl-tb", SKYRL_HARBOR, None, {}, ("rl-agentic-job-cleanup", False)),
        ("rl-verl-swe", VERL, None, {"command": "/w/run_harbor_grpo.sh"},
         ("rl-agentic-job-cleanup", False)),
        ("rl-x", TRL, None, {"labels": {"agent_config": "terminus-2"}},
         ("rl-agentic-job-cleanup", False)),
        # an empty trial directory is not a trial tree
        ("rl-skyrl-tb", SKYRL_HARBOR, EMPTY_TREE, {}, ("rl-agentic-job-cleanup", False)),
        # object-store backed: same routine, nothing on disk to reap
        ("rl-skyrl-tb", S3_CONFIG + SKYRL_HARBOR, FULL_TREE, {}, ("rl-agentic-job-cleanup", False)),
        ("rl-verl-s3", S3_CONFIG + VERL, None, {}, ("rl-agentic-job-cleanup", False)),
        # eval/datagen own their trial trees; an empty one is none
        ("eval-qwen-tb", "eval done\n", FULL_TREE, {}, ("eval-agentic-cleanup", True)),
        ("eval-qwen-tb", "eval done\n", EMPTY_TREE, {}, ("eval-agentic-cleanup", False)),
        ("datagen-tb", "chunk done\n", EMPTY_TREE, {}, ("datagen-job-cleanup", False)),
    ],
)
def test_cleanup_routing(name: str, text: str, trials: TrialTree | None, rec: dict[str, Any],
                         expected: tuple[str, bool]) -> None:
    """Agentic is a property of the run; cleanup-pending needs the run's own non-empty tree."""
    routine, pending = expected
    report = judge(_completed(name, text, trials=trials, **rec)).report
    assert report.recommendation is not None and report.recommendation.action == "cleanup"
    assert report.recommendation.why.startswith(routine)
    assert ("cleanup-pending" in report.flags) is pending
    if "s3://" in text:
        assert "object store" in report.recommendation.why


def _file(name: str) -> CompletionFile:
    raw = (STATES / name).read_bytes()
    parsed = (parse_trainer_state_json(raw) if name.endswith(".json")
              else parse_trainer_log_jsonl(raw))
    kind = "trainer_state.json" if name.endswith(".json") else "trainer_log.jsonl"
    return CompletionFile(path=f"/w/out/{kind}", kind=kind, **{
        k: parsed[k] for k in ("current_steps", "total_steps", "finished")})


def _cut_at_step(text: str, step: int) -> str:
    """The HF log as it stood when step ``step``'s dict was the last one written."""
    at = 0
    for _ in range(step):
        at = text.index("{'loss'", at) + 1
    return text[: text.index("\n", at) + 1]


@pytest.mark.parametrize(
    ("text", "files", "incomplete", "shown"),
    [
        (SFT, ["trainer_state_finished.json"], False, None),
        (SFT, ["trainer_state_stopped.json"], True, "60/95"),
        (SFT, ["trainer_log_short.jsonl"], True, "320/916"),
        (SFT, ["trainer_log_done.jsonl"], False, None),
        # a finished file wins over a stale one found beside it
        (SFT, ["trainer_state_stopped.json", "trainer_log_done.jsonl"], False, None),
        # no completion file: the log's own step and total, unless it says it finished
        (SFT, [], False, None),
        (_cut_at_step(SFT, 60), [], True, "60/95"),
    ],
)
def test_sft_completion_check(text: str, files: list[str], incomplete: bool,
                              shown: str | None) -> None:
    """A COMPLETED SFT run short of its total is incomplete-run + diagnose, never cleanup."""
    check = CompletionCheck(files=tuple(_file(n) for n in files))
    report = judge(_completed("sft-qwen-2ep", text, completion=check)).report
    assert report.recommendation is not None
    assert ("incomplete-run" in report.flags) is incomplete
    if incomplete:
        assert report.recommendation.action == "diagnose" and report.verdict == "warning"
        assert shown is not None and shown in report.trend
    else:
        assert report.recommendation.action == "cleanup" and report.verdict == "done"
        assert report.recommendation.why == "sft-job-cleanup"


def _snapshot(step: int, total: int) -> CompletionFile:
    """The newest ``checkpoint-N/trainer_state.json``: the state at that save, not at the end."""
    return CompletionFile(path=f"/w/output/checkpoint-{step}/trainer_state.json",
                          kind="trainer_state.json", current_steps=step, total_steps=total)


@pytest.mark.parametrize(
    ("text", "snapshot", "incomplete"),
    [
        # the run reached 95/95 and printed its train_runtime dict; its last save was step 90
        # (save_steps=30 and no save at the end: transformers before the end-of-training save,
        # or save_strategy="epoch" under max_steps): a replayed run read 'COMPLETED short of
        # total: step 900/916' beside its own 916/916 row
        (SFT, 90, False),
        # the log stopped at 60 too: short, as before
        (_cut_at_step(SFT, 60), 60, True),
    ],
)
def test_a_checkpoint_snapshot_does_not_overrule_a_finished_log(
        text: str, snapshot: int, incomplete: bool) -> None:
    """A checkpoint's trainer_state.json is a lower bound (the last save), so a log that says
    the run finished wins over it; an end-of-run file (root trainer_state.json,
    trainer_log.jsonl) still decides, as in test_sft_completion_check."""
    check = CompletionCheck(files=(_snapshot(snapshot, 95),))
    report = judge(_completed("sft-qwen-2ep", text, completion=check)).report
    assert ("incomplete-run" in report.flags) is incomplete
    assert report.recommendation is not None
    assert report.recommendation.action == ("diagnose" if incomplete else "cleanup")


@pytest.mark.parametrize(
    ("name", "text", "files", "routine"),
    [
        # TRL's GRPOTrainer writes HF's trainer_state.json like any Trainer
        ("rl-trl-grpo", TRL, ["trainer_state_stopped.json"], "rl-standard-job-cleanup"),
        ("rl-verl-gsm8k", VERL, ["trainer_log_short.jsonl"], "rl-standard-job-cleanup"),
        ("rl-skyrl-tb", SKYRL_HARBOR, ["trainer_state_stopped.json"], "rl-agentic-job-cleanup"),
    ],
)
def test_rl_completion_check(name: str, text: str, files: list[str], routine: str) -> None:
    """CONTRACT §6 incomplete-run is not SFT's alone: a COMPLETED RL run whose
    trainer_state.json / trainer_log.jsonl stops short of its total is diagnosed, never sent
    to its cleanup; finished, the routine of its flavour is named."""
    short = CompletionCheck(files=tuple(_file(n) for n in files))
    report = judge(_completed(name, text, completion=short)).report
    assert "incomplete-run" in report.flags and report.verdict == "warning"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert routine in report.recommendation.why and "sft-job-cleanup" not in \
        report.recommendation.why
    done = CompletionCheck(files=(_file("trainer_state_finished.json"),))
    report = judge(_completed(name, text, completion=done)).report
    assert "incomplete-run" not in report.flags and report.verdict == "done"
    assert report.recommendation is not None and report.recommendation.action == "cleanup"
    assert report.recommendation.why.startswith(routine)


def test_incomplete_run_is_in_the_json_vocabulary() -> None:
    """The new flag serialises as the contract's word."""
    check = CompletionCheck(files=(_file("trainer_state_stopped.json"),))
    report = judge(_completed("sft-qwen", SFT, completion=check)).report
    assert "incomplete-run" in json.loads(report.model_dump_json())["flags"]


@pytest.mark.parametrize(
    ("line", "backed"),
    [
        ("  trials_dir: s3://team-rl/agentic/trials", True),
        ("Uploaded trial fix-git__a8Kd3Qz to gs://bucket/run/trials/fix-git__a8Kd3Qz", True),
        ('"trial_uri": "s3://bucket/jobs/2026-11-30__10-00-00/t__x"', True),
        ("syncing s3://bucket/exp/jobs/2026-11-30__10-00-00/ done", True),
        # an object-store checkpoint upload says nothing about trials
        ("Uploading checkpoint global_step_40 to s3://bucket/ckpts/global_step_40", False),
        ("trials_dir: /scratch/alice/trials", False),
    ],
)
def test_object_store_trials(line: str, backed: bool) -> None:
    """An object-store URI makes the run object-store backed only on a line about trials."""
    assert object_store_trials(VERL + line + "\n") is backed
