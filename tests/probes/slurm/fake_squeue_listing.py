"""``squeue -h -t RUNNING|all --user=U,.. -O F:<delim>,..`` answered from a squeue --json document.

Run by the stand-in ``squeue`` of ``conftest.fake_squeue_bin`` (argv: the document's path, then
squeue's own arguments): each running job of those users (every job with ``-t all``: the
signature listing), each asked field followed by its
suffix, one row per line, as SLURM 22.05 prints them (``squeue.listing`` beside the document,
if there, is printed instead, each ``{D}`` in it the suffix) (an unset array task is ``N/A``, a job
that is not an array task its own id as ``ArrayJobID``, a pending or running job without a time
limit ends ``NONE``).
"""

import json
import os
import sys


def field(job: dict, name: str) -> str:
    array_job = job.get("array_job_id") or job.get("job_id")
    task = job.get("array_task_id")
    state = job.get("job_state")
    values = {"JobID": job.get("job_id"), "ArrayJobID": array_job,
              "ArrayTaskID": "N/A" if task is None else task, "UserName": job.get("user_name"),
              "WorkDir": job.get("current_working_directory"),
              "STDOUT": job.get("standard_output"), "Name": job.get("name"),
              # unset, squeue -O prints the StdOut pattern
              "STDERR": job.get("standard_error") or job.get("standard_output"),
              # the signature listing's (probes.remote.listing.SIGNATURE_FIELDS)
              "State": state[0] if isinstance(state, list) and state else state,
              "Reason": job.get("state_reason"), "SubmitTime": job.get("submit_time"),
              "StartTime": job.get("start_time"), "EndTime": job.get("end_time"),
              "TimeLimit": job.get("time_limit"), "exit_code": job.get("exit_code"),
              "Dependency": job.get("dependency"), "RestartCnt": job.get("restart_cnt"),
              "NodeList": job.get("nodes"), "Comment": job.get("comment"),
              "Command": job.get("command"), "HetJobID": job.get("het_job_id"),
              "HetJobOffset": job.get("het_job_offset")}
    value = values[name]
    if name == "EndTime" and "time_limit" in job and job["time_limit"] is None \
            and values["State"] in ("PENDING", "RUNNING"):
        value = "NONE"  # no time limit: 22.05 prints NONE where its document gives a number
    if isinstance(value, dict):  # 23.02+ {set, infinite, number}
        value = value.get("number") if value.get("set") else "N/A"
    return "" if value is None else str(value)


def main() -> None:
    document, args = sys.argv[1], sys.argv[2:]
    users: set[str] = set()
    fmt = ""
    every_state = False
    for i, arg in enumerate(args):
        if arg.startswith("--user="):
            users = set(arg.split("=", 1)[1].split(","))
        if arg == "-O":
            fmt = args[i + 1]
        if arg == "-t" and args[i + 1] == "all":
            every_state = True
    asked = [(part.split(":", 1)[0], part.split(":", 1)[1]) for part in fmt.split(",")]
    override = os.path.join(os.path.dirname(document), "squeue.listing")
    if os.path.exists(override):  # a listing as told, each {D} the fields' suffix
        with open(override) as fh:
            sys.stdout.write(fh.read().replace("{D}", asked[0][1]))
        return
    out = []
    with open(document) as fh:
        jobs = json.load(fh).get("jobs", [])
    for job in jobs:
        state = job.get("job_state")
        states = state if isinstance(state, list) else [state]
        if ("RUNNING" not in states and not every_state) or job.get("user_name") not in users:
            continue
        out.append("".join(field(job, name) + suffix for name, suffix in asked) + "\n")
    sys.stdout.write("".join(out))


main()
