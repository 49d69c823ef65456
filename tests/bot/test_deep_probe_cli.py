"""`jobtables probe`: usage errors before anything connects, and where dump dirs may come from."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from probes.config import ReadPlan, SlurmCluster
from probes.deep_read import rollout_request
from probes.models import JobFacts, JobState, LogFetch, SchedulerRecord, TrialTree

CONFIG = """
[[clusters]]
name = "a"
kind = "slurm"
local = true

[[clusters]]
name = "snap"
kind = "replay"
path = "/nonexistent"
"""


@pytest.mark.parametrize(("argv", "message"), [
    (["probe", "x;rm -rf /"], "is not a job id"),
    (["probe", "12", "--cluster", "nope"], "unknown cluster 'nope'"),
    (["probe", "snap:12"], "the deep probe reads SLURM and Kubernetes jobs"),
    # a Kubernetes-like name on a SLURM cluster: bad usage too, as `jobtables job` says
    (["probe", "abc"], "'abc' is not a SLURM job id"),
    (["probe", "a:rl-run"], "'rl-run' is not a SLURM job id"),
])
def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             argv: list[str], message: str) -> None:
    config = tmp_path / "jobtables.toml"
    config.write_text(CONFIG)
    assert main([*argv, "--config", str(config)]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", ["job", "probe"])
def test_a_ref_and_cluster_that_disagree_are_bad_usage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """`probe a:12 --cluster snap` silently probed on snap (`job` refused it): both refuse the
    contradiction in one line, before anything connects."""
    config = tmp_path / "jobtables.toml"
    config.write_text(CONFIG)
    assert main([command, "a:12", "--cluster", "snap", "--config", str(config)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "'a:12' names cluster 'a' but --cluster says 'snap': give one of them" in err


def test_probe_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "probe" in capsys.readouterr().out


def test_log_named_dump_dirs_are_requested_wherever_they_are() -> None:
    """A dump dir the log names outside the job's workdir is requested too (verl's
    rollout_data_dir is often on scratch): the reader's guard decides what is read there, only
    the job user's own files (tests/probes/slurm/test_e2e_probe_outside_workdir.py)."""
    record = SchedulerRecord(cluster="a", job_id="7", name="rl-x", user="alice",
                             state=JobState.RUNNING, workdir="/home/alice/run")
    text = ("Dumped generations to rollouts/3.jsonl\n"
            "Dumped generations to /home/ops/secrets/4.jsonl\n"
            "Dumped generations to /home/alice/run/../../ops/5.jsonl\n"
            "Dumped generations to /home/alice/run/val_dump/5.jsonl\n")
    facts = JobFacts(record=record, log=LogFetch(status="ok", text=text))
    cluster = SlurmCluster(name="a", local=True, trial_roots=("{workdir}/jobs",))
    request, roles = rollout_request(facts, cluster, ReadPlan(rollout_dirs=()))
    assert request["dump_dirs"] == ["/home/alice/run/validation_data",
                                    "/home/alice/run/rollouts", "/home/ops/secrets", "/home/ops",
                                    "/home/alice/run/val_dump"]
    assert roles["/home/alice/run/val_dump"] == "validation"
    assert request["trial_roots"] == ["/home/alice/run/jobs"]
    assert request["max_trials"] == 64 and request["owner"] == "alice"


def test_skyrl_eval_dumps_the_log_names_are_read() -> None:
    """SkyRL names its eval dumps in its log (``dump_per_dataset_eval_results``: "Dumped eval
    data for <source> to <export_path>/dumped_evals/global_step_N_evals/<source>.jsonl"); a
    run whose ``trainer.export_path`` is not ``{workdir}/exports`` had them unread ('nothing
    to judge'). Its export dir is read like verl's logged dirs, through the reader's guard."""
    record = SchedulerRecord(cluster="a", job_id="7", name="rl-x", user="alice",
                             state=JobState.RUNNING, workdir="/home/alice/run")
    prefix = "2026-12-05 05:01:02.345 | INFO     | skyrl_train.utils.trainer_utils:dump:265 - "
    text = (f"{prefix}Dumped eval data for gsm8k to /home/alice/run/out/exp1/dumped_evals/"
            "global_step_10_evals/gsm8k.jsonl\n"
            f"{prefix}Dumped eval data for openai/gsm8k to out/exp2/dumped_evals/eval_only/"
            "openai_gsm8k.jsonl\n"
            f"{prefix}Dumped eval data for x to /home/bob/exports/dumped_evals/"
            "global_step_10_evals/x.jsonl\n")
    facts = JobFacts(record=record, log=LogFetch(status="ok", text=text))
    cluster = SlurmCluster(name="a", local=True)
    request, roles = rollout_request(facts, cluster, ReadPlan(rollout_dirs=(),
                                                              validation_dirs=()))
    assert request["dump_dirs"] == ["/home/alice/run/out/exp1", "/home/alice/run/out/exp2",
                                    "/home/bob/exports"]
    assert roles["/home/alice/run/out/exp1"] == "rollout"


def test_the_trials_dir_the_row_counted_is_sampled() -> None:
    """An agentic run's trials dir named by its log (SkyRL's harbor_trial_config.trials_dir),
    which the sweep counted as its trial tree, is where the probe samples trials too: a
    SkyRL+Harbor run with 24 trials in {workdir}/trials read 'no Harbor trials' on the real
    SLURM. The configured roots, which the row did not count, are not mixed in (review of
    8550510: an earlier eval's 12 reward-1.0 trials under {workdir}/jobs were sampled with the
    run's 12 reward-0 ones, 'no pathology found in 24 of 24 trials'); a counted configured
    root is read with the others, as before; none is read twice."""
    record = SchedulerRecord(cluster="a", job_id="7", name="rl-skyrl-tb", user="alice",
                             state=JobState.COMPLETED, workdir="/home/alice/run")
    counted = TrialTree(root="/home/alice/run/trials")
    facts = JobFacts(record=record, log=LogFetch(status="ok", text="  trials_dir: trials\n"),
                     trials=counted)
    cluster = SlurmCluster(name="a", local=True, trial_roots=("{workdir}/jobs",))
    request, _ = rollout_request(facts, cluster, ReadPlan())
    assert request["trial_roots"] == ["/home/alice/run/trials"]
    two = SlurmCluster(name="a", local=True, trial_roots=("{workdir}/jobs", "/scratch/{user}"))
    first = facts.model_copy(update={"trials": TrialTree(root="/scratch/alice")})
    assert rollout_request(first, two, ReadPlan())[0]["trial_roots"] == [
        "/scratch/alice", "/home/alice/run/jobs"]
    same = facts.model_copy(update={"trials": TrialTree(root="/home/alice/run/jobs")})
    assert rollout_request(same, cluster, ReadPlan())[0]["trial_roots"] == [
        "/home/alice/run/jobs"]
    absent = facts.model_copy(update={"trials": TrialTree(root="/home/alice/run/trials",
                                                            exists=False)})
    assert rollout_request(absent, cluster, ReadPlan())[0]["trial_roots"] == [
        "/home/alice/run/jobs"]
