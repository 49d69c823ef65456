"""A requeued job read through ``squeue -o`` (``jobtables job``) keeps its restart count, as
``squeue --json``'s ``restart_cnt`` gives it to a sweep: a requeued run is no first launch.

The scontrol line is SLURM 22.05.8's for a batch job that requeued itself near its walltime
(``#SBATCH --signal=B:USR1@40``, ``scontrol requeue $SLURM_JOB_ID`` in the trap) and runs again.
"""

from __future__ import annotations

from datetime import UTC, datetime

from probes.slurm.plain import parse_squeue_plain
from probes.slurm.scontrol import merge_scontrol, parse_scontrol_all

NOW = datetime.fromtimestamp(1796400300, tz=UTC)
SQUEUE = ("1515|jobtables|RUNNING|None|1796400078|1796400199|1796400319|2:00||0:48|"
          "rl-lc-reqsig|/w/reqsig|/w/reqsig.sh")
SCONTROL = (
    "JobId=1515 JobName=rl-lc-reqsig UserId=jobtables(1001) GroupId=jobtables(1001) "
    "MCS_label=N/A Priority=4294967000 Nice=0 Account=(null) QOS=(null) JobState=RUNNING "
    "Reason=None Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 "
    "RunTime=00:00:48 TimeLimit=00:02:00 TimeMin=N/A SubmitTime=2026-12-04T16:01:18 "
    "EligibleTime=2026-12-04T16:03:19 AccrueTime=2026-12-04T16:03:19 "
    "StartTime=2026-12-04T16:03:19 EndTime=2026-12-04T16:05:19 Deadline=N/A SuspendTime=None "
    "SecsPreSuspend=0 LastSchedEval=2026-12-04T16:03:19 Scheduler=Main Partition=debug "
    "AllocNode:Sid=localhost:24124 ReqNodeList=(null) ExcNodeList=(null) NodeList=vm "
    "BatchHost=vm NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
    "MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
    "OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) Command=/w/reqsig.sh "
    "WorkDir=/w/reqsig StdErr=/w/reqsig/train.log StdIn=/dev/null "
    "StdOut=/w/reqsig/train.log Power= \n")


def test_a_requeued_jobs_restarts_come_from_scontrol() -> None:
    """``Restarts=1`` in scontrol is the record's ``restarts`` (squeue -o prints none)."""
    (record,) = parse_squeue_plain(SQUEUE, cluster="c", now=NOW)
    assert record.restarts == 0
    fields = parse_scontrol_all(SCONTROL)
    assert merge_scontrol(record, fields.get("1515")).restarts == 1


def test_no_restarts_leave_the_count_alone() -> None:
    """``Restarts=0`` (and a value that is no count) change nothing."""
    (record,) = parse_squeue_plain(SQUEUE, cluster="c", now=NOW)
    for raw in ("0", "x"):
        fields = parse_scontrol_all(SCONTROL.replace("Restarts=1", f"Restarts={raw}"))
        assert merge_scontrol(record, fields.get("1515")).restarts == 0
