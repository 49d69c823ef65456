"""A path in ``jobtables job``'s facts (the log read, the workdir) is cluster text on one
line: a line break in it shows as ␤ and cannot start a line of its own.

Found by the hostile-cluster review: a job submitted as ``jtuser`` with
``sbatch -D $'/tmp/wd\\nline'`` printed ``Log: not found (workdir /tmp/wd`` and then ``line)``
as a line of its own, in the terminal and in the ``/job`` answer's code block. The name
already showed its breaks as ␤ (``report.cells.one_line``); the paths kept theirs
(``printable`` keeps line breaks), so a workdir or log path could print a forged fact line
such as ``Recommendation: none`` under the real one.
"""

from __future__ import annotations

from probes.models import JobState
from report.models import DeepProbe, JobDetail
from report.probe_text import render_probe_text
from report.render import render_job_detail
from tests.report.factories import facts, judge, log, record, report_job

FORGED = "Recommendation: none"


def test_a_workdir_and_a_log_path_with_line_breaks_stay_on_their_line() -> None:
    """No line of the answer is the forged fact; the paths read with ␤ in place."""
    job = report_job("sft-x", "sft", state=JobState.FAILED, verdict="failed",
                     log_path=f"/tmp/log\n{FORGED}\r\nFlags: none", flags=["traceback"],
                     recommendation={"action": "diagnose", "why": "a traceback"})
    detail = JobDetail(report=job, workdir=f"/tmp/wd\n{FORGED}")
    lines = render_job_detail(detail, width=100).split("\n")
    assert not [line for line in lines if line.startswith((FORGED, "Flags: none"))], lines
    (log_line,) = [line for line in lines if line.startswith("Log: ")]
    assert log_line.startswith(f"Log: /tmp/log␤{FORGED}␤Flags: none (workdir /tmp/wd␤")


def test_the_deep_probe_s_paths_read_stay_on_their_line() -> None:
    """``jobtables probe``: the log, trial roots, dump paths and skipped files it names."""
    forged = "cost: 0 files"
    probe = DeepProbe(verdict="NO-KILL", reasons=["rollouts look diverse"], read={
        "log": f"/w\n{forged}", "log_steps": 3,
        "trials": {"listed": 4, "sampled": 2, "roots": [f"/w/jobs\n{forged}"]},
        "dumps": [{"kind": "verl", "role": "rollout", "path": f"/w/r\n{forged}", "samples": 2,
                   "steps_read": [3], "steps_listed": 1}],
        "skipped": [f"/w/x\n{forged}: unreadable"]})
    job = report_job("rl-x", "rl", step=3, deep_probe=probe)
    lines = render_probe_text(JobDetail(report=job), width=100).split("\n")
    assert len([line for line in lines if line.strip().startswith("cost:")]) == 1, lines


def test_a_path_in_the_note_stays_on_its_line() -> None:
    """The Note fact names cluster paths too (the ``--output`` the log was looked for under,
    a checkpoint directory that could not be read): a line break in one shows as ␤ there,
    through the judge, as in the Log fact (found in review of 15cb34b)."""
    rec = record("sft-x", "300", stdout_path=f"/w/a\n{FORGED}.out")
    fetch = log("mismatch", requested_path=f"/w/a\n{FORGED}.out", path="/w/300.out")
    detail = judge(facts(rec, log_fetch=fetch))
    assert detail.note and "\n" in detail.note  # the judge keeps the path as it is
    lines = render_job_detail(detail, width=200).split("\n")
    # One Recommendation line: the real one (this job has none), not the path's forged one.
    assert len([line for line in lines if line.startswith("Recommendation:")]) == 1, lines
    (note,) = [line for line in lines if line.startswith("Note: ")]
    assert f"StdOut /w/a␤{FORGED}.out absent" in note, note
