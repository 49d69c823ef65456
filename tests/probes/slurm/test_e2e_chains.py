"""End to end on the real SLURM 22.05 cluster: which TIMEOUT is a chain restart.

Real walltime TIMEOUTs (``--time=1``), each with a real successor queued at once:

- ``afterok``: SLURM leaves the successor PENDING with ``DependencyNeverSatisfied`` (this
  cluster has no ``kill_invalid_depend``); the TIMEOUT is judged failed with that reason;
- a renamed resume (``-r2``, same workdir and ``--output`` pattern, ``afterany``): once it starts,
  SLURM clears its dependency, and a fresh probe with no memory still names it as the successor;
- a restart the launcher put in a run directory of its own (``afterany``, same name, another
  ``--chdir``): with the dependency cleared, SLURM's EligibleTime (set at the predecessor's end)
  names it, in the sweep and in ``jobtables job`` (``collect_one``);
- a restart appending to its predecessor's log (one ``-o`` file, ``--open-mode=append``):
  each attempt reads its own part of the file (``probes.logs.attempts``).

Jobs get unique names per run and only their own ids are cancelled in teardown. The TIMEOUT
would take 60-90 s: the predecessors' end time is set to now (``end_now``; when ``test_e2e``
ran first they timed out already) and the module waits for it with a bounded poll of
``squeue --json``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from bot.config import Config
from bot.deep_probe import run_deep_probe
from probes.models import ClusterFacts, JobState, SchedulerRecord
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import SshRunner
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.probes.slurm.conftest import SlurmEnv, WalltimeChains
from tests.probes.slurm.test_e2e import _cleanup, _wait_for, end_now

BODY = "#!/bin/bash\necho 'step 1'\nsleep 600\n"
SHARED_PRED = ("#!/bin/bash\necho '***** Running training *****'\n"
               "echo '  Total optimization steps = 100'\n"
               "for i in 1 2 3 4 5 6; do echo \"{'loss': 1.$((9 - i)), 'grad_norm': 0.8$i, "
               "'learning_rate': 2e-05, 'epoch': 0.0$i}\"; done\nsleep 600\n")
"""A chain's first attempt: six HF Trainer steps, then its walltime."""
SHARED_SUCC = ("#!/bin/bash\necho 'Resuming from checkpoint checkpoint-6'\n"
               "echo 'Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00,  1.2it/s]'\n"
               "sleep 600\n")
"""Its restart, appending to the same log: bring-up, no step of its own yet."""
VERL = ("#!/bin/bash\necho '(TaskRunner pid=7) Total training steps: 100'\n"
        "for i in 1 2 3; do echo \"(TaskRunner pid=7) step:$i - actor/entropy:0.5$i - "
        "actor/pg_loss:-0.004 - actor/grad_norm:0.2$i - critic/score/mean:0.4$i - "
        "response_length/mean:800.0 - training/global_step:$i\"; done\nsleep 600\n")
"""A verl attempt that logged three steps (no checkpoint: its restart starts over)."""


@dataclass
class Chains:
    """The submitted jobs, the sweep after both TIMEOUTs, and its judged rows."""

    ids: dict[str, str]
    facts: ClusterFacts
    rows: dict[str, JobReport]
    one: JobReport
    """The moved restart's predecessor as ``jobtables job`` reads it (``collect_one``)."""
    probed: JobReport
    """The renamed resume's predecessor as ``jobtables probe`` reads it (``run_deep_probe``)."""
    rerun: JobReport
    """The verl restart as ``jobtables job`` reads it (``collect_one``)."""

    def record(self, key: str) -> SchedulerRecord:
        return next(j.record for j in self.facts.jobs if j.record.job_id == self.ids[key])


async def submit_chains(env: SlurmEnv, run_dir: str, ids: dict[str, str]) -> None:
    """Submit the chains into ``run_dir``, their ids into ``ids`` as they are known."""
    tag = run_dir.rsplit("-", 1)[-1]
    runner = SshRunner(env.cluster())
    try:
        await runner.run(["mkdir", "-p", f"{run_dir}/ok", f"{run_dir}/resume/logs",
                          f"{run_dir}/moved1", f"{run_dir}/moved2", f"{run_dir}/shared",
                          f"{run_dir}/rerun"])
        for script, body in (("job", BODY), ("pred", SHARED_PRED), ("succ", SHARED_SUCC),
                             ("verl", VERL)):
            await runner.run(["sh", "-c", f"cat > {run_dir}/{script}.sbatch"], stdin=body)
        shared = ["-o", f"{run_dir}/shared/train.log", "--open-mode=append"]
        jobs = [
            ("ok_pred", f"rl-okchain-{tag}", "ok", ["--time=1"]),
            ("ok_succ", f"rl-okchain-{tag}", "ok", ["--dependency=afterok:{ok_pred}"]),
            ("resume_pred", f"rl-resume-{tag}", "resume", ["--time=1"]),
            ("resume_succ", f"rl-resume-{tag}-r2", "resume",
             ["--dependency=afterany:{resume_pred}"]),
            ("moved_pred", f"rl-moved-{tag}", "moved1", ["--time=1"]),
            ("moved_succ", f"rl-moved-{tag}", "moved2", ["--dependency=afterany:{moved_pred}"]),
            # one log for every attempt (sbatch -o FILE --open-mode=append): a common launcher
            ("shared_pred", f"sft-shared-{tag}", "shared", ["--time=1", *shared]),
            ("shared_succ", f"sft-shared-{tag}", "shared",
             ["--dependency=afterany:{shared_pred}", *shared]),
            ("rerun_pred", f"rl-rerun-{tag}", "rerun", ["--time=1"]),
            ("rerun_succ", f"rl-rerun-{tag}", "rerun", ["--dependency=afterany:{rerun_pred}"]),
        ]
        for key, name, sub, extra in jobs:
            workdir = f"{run_dir}/{sub}"
            script = (key.split("_")[1] if sub == "shared" else
                      "verl" if sub == "rerun" else "job")
            output = ([] if sub == "shared" else
                      ["-o", f"{workdir}/logs/train_%j.log" if sub == "resume" else
                       f"{workdir}/slurm-%j.out"])
            argv = ["sbatch", "--parsable", "-J", name, "--chdir", workdir, *output,
                    *(e.format(**ids) for e in extra), f"{run_dir}/{script}.sbatch"]
            res = await runner.run(argv)
            ids[key] = res.stdout.strip().split(";")[0]
    finally:
        await runner.aclose()


@pytest.fixture(scope="module")
def chains(slurm_env: SlurmEnv, walltime_chains: WalltimeChains) -> Iterator[Chains]:
    """Both chains (submitted early when ``test_e2e`` runs too), waited for until both
    TIMEOUTs are done and the resume runs, then swept once."""
    ids = walltime_chains.ids
    try:
        end_now([ids[key] for key in ("ok_pred", "resume_pred", "moved_pred", "shared_pred",
                                      "rerun_pred")])
        asyncio.run(_wait_for(slurm_env, ids, {
            "ok_pred": {JobState.TIMEOUT}, "resume_pred": {JobState.TIMEOUT},
            "resume_succ": {JobState.RUNNING}, "ok_succ": {JobState.PENDING},
            "moved_pred": {JobState.TIMEOUT}, "moved_succ": {JobState.RUNNING},
            "shared_pred": {JobState.TIMEOUT}, "shared_succ": {JobState.RUNNING},
            "rerun_pred": {JobState.TIMEOUT}, "rerun_succ": {JobState.RUNNING},
        }, bound_s=240, settle_s=2))
        facts = asyncio.run(SlurmProbe(slurm_env.cluster()).collect())
        report, _ = build_report([facts], settings=ReportSettings(), now=datetime.now(UTC))
        rows = {j.job_id: j for j in report.jobs}
        one_facts = asyncio.run(SlurmProbe(slurm_env.cluster()).collect_one(ids["moved_pred"]))
        one, _ = build_report([one_facts], settings=ReportSettings(), now=datetime.now(UTC))
        probed = asyncio.run(run_deep_probe(Config(clusters=(slurm_env.cluster(),)), None,
                                            ids["resume_pred"]))
        rerun_facts = asyncio.run(SlurmProbe(slurm_env.cluster()).collect_one(ids["rerun_succ"]))
        rerun, _ = build_report([rerun_facts], settings=ReportSettings(), now=datetime.now(UTC))
        yield Chains(ids, facts, {key: rows[job_id] for key, job_id in ids.items()},
                     next(j for j in one.jobs if j.job_id == ids["moved_pred"]), probed.report,
                     next(j for j in rerun.jobs if j.job_id == ids["rerun_succ"]))
    finally:  # not left running (the successors sleep) into the modules after this one
        asyncio.run(_cleanup(slurm_env, ids, walltime_chains.run_dir))


def test_afterok_successor_is_never_satisfied_on_the_real_cluster(chains: Chains) -> None:
    """SLURM itself keeps the afterok dependant pending for ever after a TIMEOUT."""
    succ = chains.record("ok_succ")
    assert succ.state is JobState.PENDING and succ.reason == "DependencyNeverSatisfied"
    assert succ.dependency is not None and "afterok" in succ.dependency
    assert succ.depends_on == (chains.ids["ok_pred"],)


def test_timeout_with_only_an_afterok_successor_is_failed(chains: Chains) -> None:
    """No chain-restart: verdict failed, and the trend and recommendation say why."""
    row = chains.rows["ok_pred"]
    assert row.state is JobState.TIMEOUT
    assert "chain-restart" not in row.flags and row.successor is None
    assert row.verdict == "failed"
    assert "DependencyNeverSatisfied" in row.trend
    assert row.recommendation is not None and row.recommendation.action == "diagnose"
    assert chains.ids["ok_succ"] in row.recommendation.why


def test_renamed_resume_is_found_after_slurm_clears_the_dependency(chains: Chains) -> None:
    """The running ``-r2`` successor has no dependency left, yet it is the named successor."""
    succ, pred = chains.record("resume_succ"), chains.record("resume_pred")
    assert succ.state is JobState.RUNNING and succ.depends_on == ()
    assert succ.name != pred.name and succ.workdir == pred.workdir
    row = chains.rows["resume_pred"]
    assert "chain-restart" in row.flags and row.verdict == "restarting"
    assert row.successor == chains.ids["resume_succ"]


def test_restart_in_another_workdir_is_found_by_its_eligible_time(chains: Chains) -> None:
    """Same name, afterany, its own --chdir: once SLURM clears the met dependency only the
    successor's EligibleTime (the predecessor's end) ties it to the TIMEOUT. It read 'Walltime
    TIMEOUT; no successor queued' (failed) in the sweep and in ``jobtables job``."""
    succ, pred = chains.record("moved_succ"), chains.record("moved_pred")
    assert succ.depends_on == () and succ.workdir != pred.workdir
    assert succ.eligible_time is not None and pred.end_time is not None
    for row in (chains.rows["moved_pred"], chains.one):
        assert "chain-restart" in row.flags and row.verdict == "restarting"
        assert row.successor == chains.ids["moved_succ"]


def test_the_deep_probe_row_names_the_successor_the_sweep_names(chains: Chains) -> None:
    """``jobtables probe`` on a TIMEOUT whose afterany restart runs read it alone: 'Walltime
    TIMEOUT; no successor queued', verdict failed and a diagnose recommendation, while the
    sweep and ``jobtables job`` said chain-restart -> the successor (seen replaying a verl
    chain on the real cluster). The probe's row is the sweep's row."""
    sweep, probed = chains.rows["resume_pred"], chains.probed
    assert probed.deep_probe is not None
    assert "chain-restart" in probed.flags and probed.verdict == "restarting"
    assert probed.successor == sweep.successor == chains.ids["resume_succ"]
    assert probed.trend == sweep.trend


def test_a_running_restart_is_no_first_launch_in_the_job_view_either(chains: Chains) -> None:
    """A verl run's afterany restart (same name and workdir, started over at step 1: no
    checkpoint) is no first launch in the sweep, whose earlier attempt stands in for memory;
    ``jobtables job`` on it read it alone and flagged it deep-probe ('first launch, still in
    its first steps', recommendation deep_probe): two answers for one job."""
    sweep, one = chains.rows["rerun_succ"], chains.rerun
    assert sweep.state is JobState.RUNNING and sweep.step == one.step == 3
    assert "deep-probe" not in sweep.flags
    assert sorted(one.flags) == sorted(sweep.flags) and one.verdict == sweep.verdict
    assert one.trend == sweep.trend and one.recommendation == sweep.recommendation


def test_attempts_appending_to_one_log_each_read_their_own_part(chains: Chains) -> None:
    """Both attempts write one file (``-o train.log --open-mode=append``), slurmstepd's
    ``*** JOB N ... CANCELLED AT ... DUE TO TIME LIMIT ***`` between them. The restart read
    the predecessor's six steps as its own ('healthy', 6/100, an ETA) while still in
    bring-up; now it is in the buffer table, and the TIMEOUT keeps its steps and its end."""
    pred, succ = chains.rows["shared_pred"], chains.rows["shared_succ"]
    assert "chain-restart" in pred.flags and pred.successor == chains.ids["shared_succ"]
    assert (pred.step, pred.total_steps) == (6, 100)
    assert succ.state is JobState.RUNNING and succ.step is None
    assert succ.verdict == "buffering" and "buffer-filling" in succ.flags
    logs = {j.record.job_id: j.log for j in chains.facts.jobs}
    pred_log, succ_log = logs[chains.ids["shared_pred"]], logs[chains.ids["shared_succ"]]
    assert pred_log is not None and succ_log is not None
    assert pred_log.path == succ_log.path
    assert succ_log.text.startswith("Resuming from checkpoint")
    assert succ_log.offset > 0
