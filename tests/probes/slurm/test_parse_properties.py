"""Property tests: no job's text forges another job's record, in scontrol -o or squeue -o.

Jobs are generated with every user-chosen field built from ``\\n``, ``\\r``, ``|``, ``=``,
spaces and the tokens a forger would use (``\\nJobId=<another id> ``, `` StdOut=/planted``,
a whole plain ``squeue -o`` line). The text is printed the way SLURM 22.05 prints it (the key
order of a real ``scontrol show job -o`` line; ``plain_format``'s tokens around squeue's
fields), then parsed: N jobs in gives N records out, each field byte-equal to what was
submitted. The one ambiguity scontrol's format leaves (a job's StdErr/StdIn/StdOut holding
their own key names, shifting that job's own paths) is left out of those three fields and
documented in ``probes/slurm/scontrol.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.slurm.plain import PLAIN_FIELDS, new_nonce, parse_squeue_plain, plain_format
from probes.slurm.scontrol import Known, parse_scontrol_all

NOW = datetime(2026, 12, 1, tzinfo=UTC)
PLAIN_TOKENS = ["\n", "\r", "|", "=", " ", "a", "/", "7|alice|RUNNING|None|1|1|1|1:00||0:01|x|/w|c",
                "<R:", "<F:", ">"]
FORGE_TOKENS = ["\n", "\r", "|", "=", " ", "a", "/", "\nJobId=2 JobName=x UserId=u(1) ",
                " StdOut=/planted", " WorkDir=/planted", " UserId=root(0)", " Command=/x",
                "\nJobId=3 ", " Dependency=afterany:3", " Power="]
PATH_TOKENS = ["\n", "\r", "|", "=", " ", "a", "/", "\nJobId=2 JobName=x ", " UserId=root(0)",
               " Dependency=afterany:3"]


def _text(tokens: list[str], min_size: int = 0) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(tokens), min_size=min_size, max_size=8).map("".join)


@dataclass(frozen=True)
class Job:
    name: str
    command: str
    workdir: str
    comment: str
    stderr: str
    stdin: str
    stdout: str
    mail: str


JOBS = st.lists(st.builds(
    Job, name=_text(FORGE_TOKENS), command=_text(FORGE_TOKENS, 1),
    workdir=_text(FORGE_TOKENS, 1).map(lambda s: "/" + s), comment=_text(PATH_TOKENS),
    stderr=_text(PATH_TOKENS, 1), stdin=_text(PATH_TOKENS, 1), stdout=_text(PATH_TOKENS, 1),
    mail=_text([t for t in FORGE_TOKENS if "JobId" not in t])), min_size=1, max_size=6)


def _scontrol_line(job_id: int, job: Job) -> str:
    """What scontrol 22.05 prints for one job (key order of a captured line)."""
    return (f"JobId={job_id} JobName={job.name} UserId=jtuser(1002) GroupId=jtuser(1002) "
            "MCS_label=N/A Priority=1 Nice=0 Account=(null) QOS=(null) JobState=RUNNING "
            "Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 "
            "ExitCode=0:0 RunTime=00:00:01 TimeLimit=01:00:00 Partition=debug NodeList=vm "
            "TRES=cpu=1,node=1,billing=1 Features=(null) Licenses=(null) Network=(null) "
            f"Command={job.command} WorkDir={job.workdir} Comment={job.comment} "
            f"StdErr={job.stderr} StdIn={job.stdin} StdOut={job.stdout} Power= "
            f"MailUser={job.mail} MailType=END\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JOBS)
def test_scontrol_one_record_per_job_fields_byte_equal(jobs: list[Job]) -> None:
    """N jobs in, N records out; no text of one job becomes another's record or key."""
    ids = [100 + i for i in range(len(jobs))]
    text = "".join(_scontrol_line(i, j) for i, j in zip(ids, jobs, strict=True))
    known = {str(i): Known(name=j.name, command=j.command, workdir=j.workdir)
             for i, j in zip(ids, jobs, strict=True)}
    fields = parse_scontrol_all(text, wanted=known.keys(), known=known)
    assert sorted(fields) == sorted(known)
    for job_id, job in zip(ids, jobs, strict=True):
        got = fields[str(job_id)]
        assert (got["JobId"], got["UserId"], got["JobState"]) == (
            str(job_id), "jtuser(1002)", "RUNNING")
        assert (got["JobName"], got["Command"], got["WorkDir"]) == (
            job.name, job.command, job.workdir)
        assert (got["StdErr"], got["StdIn"], got["StdOut"]) == (
            job.stderr, job.stdin, job.stdout)
        assert got["Dependency"] == "(null)"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_text(PLAIN_TOKENS), _text(PLAIN_TOKENS, 1).map(lambda s: "/" + s),
                          _text(PLAIN_TOKENS, 1)), min_size=1, max_size=6))
def test_plain_one_record_per_job_fields_byte_equal(jobs: list[tuple[str, str, str]]) -> None:
    """squeue -o with this sweep's tokens: N records, name/workdir/command byte-equal."""
    nonce = new_nonce()
    fmt = plain_format(nonce)
    lines = []
    for i, (name, workdir, command) in enumerate(jobs):
        values = {"%i": str(200 + i), "%u": "jtuser", "%T": "RUNNING", "%r": "None",
                  "%V": "1796000000", "%S": "1796000100", "%e": "1796003700", "%l": "1:00:00",
                  "%E": "(null)", "%M": "0:30", "%j": name, "%Z": workdir, "%o": command}
        text = fmt
        for field in PLAIN_FIELDS:
            text = text.replace(field, values[field], 1)
        lines.append(text + "\n")
    records = parse_squeue_plain("".join(lines), cluster="c", now=NOW, nonce=nonce)
    assert [r.job_id for r in records] == [str(200 + i) for i in range(len(jobs))]
    for record, (name, workdir, command) in zip(records, jobs, strict=True):
        assert (record.name, record.workdir, record.command) == (name, workdir, command)
        assert (record.user, record.elapsed_s) == ("jtuser", 30)
