"""A restart chain's resume queued behind its running attempt is no job filling its buffer.

Replayed on the real SLURM 22.05 as jtuser: an HF Trainer SFT cell 1810 running at step 40 of
3000 and its resume 1811 queued ``sbatch --dependency=afterany:1810`` (one name, one workdir),
as a walltime-limited chain is submitted. 1811 read ``buffering`` [buffer-filling] 'Pending
(Dependency)' in the Filling buffer table, and the sweep's summary counted it '1 filling
buffer'. The seed's buffer-filling table is for a fresh launch in bring-up (gang/queue
admission) until its first step lands; a resume waits on its attempt's end, in no queue
admission (CONTRACT: ``buffer-filling`` is 'running or in bring-up'), and the seed counts such
copies apart ('restart-chain resume copies inflate' the pending count). It now reads 'Resume
queued: starts when 1810 ends', without the flag, and the summary counts it 'resume queued'.
A job queued fresh (``--begin``, priority) or behind another run's job is still filling.
"""

from __future__ import annotations

from datetime import timedelta

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from report.sweep_summary import summary_lines
from tests.report.factories import NOW, cluster, log, record

BAR = "".join(f"  {i}%|          | {i}/3000 [00:{i:02d}<00:10, 11.64s/it]{{'loss': '1.{80 - i}', "
              f"'grad_norm': '0.8', 'learning_rate': '1e-05', 'epoch': '0.0{i}'}}\n"
              for i in range(1, 41))


def _rows(*jobs: JobFacts) -> tuple[dict[str, JobReport], list[str]]:
    report, _ = build_report([cluster("alpha", list(jobs))], settings=ReportSettings(), now=NOW)
    return {j.job_id: j for j in report.jobs}, summary_lines(report)


def _running(job_id: str = "1810", name: str = "sft-chain-lr1e5") -> JobFacts:
    rec = record(name, job_id, workdir="/w/q", start_time=NOW - timedelta(minutes=8),
                 elapsed_s=480)
    return JobFacts(record=rec, log=log(text=BAR), summary=parse_log(BAR, mtime=NOW))


def _pending(job_id: str, name: str, *, reason: str, dependency: str | None = None,
             ) -> JobFacts:
    rec = record(name, job_id, JobState.PENDING, workdir="/w/q", start_time=None,
                 elapsed_s=0, reason=reason, dependency=dependency,
                 depends_on=(dependency.split(":")[1].split("(")[0],) if dependency else ())
    return JobFacts(record=rec)


def test_a_resume_queued_behind_its_running_attempt_is_not_filling_a_buffer() -> None:
    rows, lines = _rows(_running(), _pending("1811", "sft-chain-lr1e5", reason="Dependency",
                                             dependency="afterany:1810(unfulfilled)"))
    resume = rows["1811"]
    assert "buffer-filling" not in resume.flags, resume.flags
    assert resume.trend == "Resume queued: starts when 1810 ends", resume.trend
    [sft] = [line for line in lines if line.startswith("SFT:")]
    assert "filling buffer" not in sft and "1 resume queued" in sft, sft


def test_a_job_queued_otherwise_is_still_filling_its_buffer() -> None:
    """Near misses: a fresh launch waiting for its begin time, and an eval queued behind the
    training run (another run's job, not its resume), stay in bring-up."""
    rows, lines = _rows(
        _running(), _pending("1812", "sft-fresh-queued", reason="BeginTime"),
        _pending("1813", "sft-other-cell", reason="Dependency",
                 dependency="afterany:1810(unfulfilled)"))
    for job_id in ("1812", "1813"):
        assert "buffer-filling" in rows[job_id].flags, rows[job_id]
        assert rows[job_id].trend.startswith("Pending ("), rows[job_id].trend
    [sft] = [line for line in lines if line.startswith("SFT:")]
    assert "2 filling buffer" in sft and "resume queued" not in sft, sft
